"""WSGI entry point (gunicorn console.wsgi)."""

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
application = get_wsgi_application()

from apps.core.checks import refuse_weak_secret_key  # noqa: E402  (after Django is set up)

refuse_weak_secret_key()


def _settle() -> None:
    """Import every view now and take what is loaded out of the cyclic garbage collector's sight.

    A worker's heap is mostly Django's, DRF's and our modules' objects, which live as long as it does;
    each full collection walked all of them again (measured in-process on the submission path: 0.57 ms
    of collector time per request over a stretch with a full collection, 0.13 ms frozen). `gc.freeze()`
    moves them to a generation that is never collected; what requests allocate is collected as before.
    Importing the URL configuration first puts the views there too (and spares the first request that work).
    """
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imports the views
    _load_task_publishing()
    gc.freeze()


def _load_task_publishing() -> None:
    """Build what a worker's first task publish would, without connecting to the broker.

    The first `delay()` in a process imports and builds Celery's publishing machinery (the task
    classes, the producer pool, the broker's transport, the event dispatcher): 25 ms of CPU, paid by
    whichever request first woke the outbox in that worker (seen as a submission with 39 ms of CPU in
    the benchmark). Only the connection itself is left to the first publish.
    """
    from console.celery import app

    app.loader.import_default_modules()
    app.finalize(auto=True)
    app.amqp.producer_pool  # noqa: B018
    app.events.Dispatcher  # noqa: B018
    broker = app.connection_for_write()
    broker.transport  # noqa: B018 - the transport class, imported and built; nothing is opened
    broker.release()


_settle()
