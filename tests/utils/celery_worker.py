"""A real Celery worker on Redis for the tests that need one (module-scoped, solo pool, empty queue).

Shared by tests/integration and tests/cli: a conftest imports the fixtures (`from tests.utils.celery_worker import
live_celery, worker`); tests using them are marked `integration` so that tasks are sent, not run eagerly.
"""

import pytest

from console.celery import app


@pytest.fixture(scope="module")
def worker(django_db_blocker):
    from celery.contrib.testing.worker import start_worker

    if not app.conf.broker_url.startswith("redis://"):
        pytest.fail(
            f"integration tests need a Redis broker; CELERY_BROKER_URL is {app.conf.broker_url!r} (make test sets it)"
        )
    with app.connection_for_write() as conn:  # start from an empty test queue
        conn.default_channel.queue_purge("celery")
    with django_db_blocker.unblock(), start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING"):
        yield


@pytest.fixture
def live_celery(worker):
    assert not app.conf.task_always_eager
    yield
