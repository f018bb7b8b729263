"""A real Celery worker on Redis for the tests that need one (module-scoped, solo pool, empty queue).

Shared by tests/integration and tests/cli: a conftest imports the fixtures (`from tests.utils.celery_worker import
live_celery, worker`); tests using them are marked `integration` so that tasks are sent, not run eagerly.
"""

import threading
import time

import pytest
from celery import signals

from console.celery import app

_running = 0
_last_finished = 0.0
_lock = threading.Lock()


@signals.task_prerun.connect
def _started(**_):
    global _running
    with _lock:
        _running += 1


@signals.task_postrun.connect
def _finished(**_):
    global _running, _last_finished
    with _lock:
        _running -= 1
        _last_finished = time.monotonic()


def _purge() -> None:
    from django.conf import settings

    with app.connection_for_write() as conn:
        for queue in settings.CELERY_QUEUE_NAMES:
            conn.default_channel.queue_purge(queue)


def wait_until_idle(quiet_s: float = 0.3, timeout_s: float = 60.0) -> None:
    """Drop what is still queued and wait for the task in hand to finish, so that the test database's flush
    (TRUNCATE of every table) never meets a task's open transaction: the two deadlock, and PostgreSQL may abort the
    flush (a CI run failed so). Idle means no task running for `quiet_s`: the worker prefetches one message."""
    deadline = time.monotonic() + timeout_s
    _purge()
    while time.monotonic() < deadline:
        with _lock:
            idle = _running == 0 and time.monotonic() - _last_finished >= quiet_s
        if idle:
            return
        time.sleep(0.05)
    raise AssertionError(f"the Celery worker was still running a task {timeout_s} s after the test ended")


@pytest.fixture(scope="module")
def worker(django_db_blocker):
    from celery.contrib.testing.worker import start_worker

    if not app.conf.broker_url.startswith("redis://"):
        pytest.fail(
            f"integration tests need a Redis broker; CELERY_BROKER_URL is {app.conf.broker_url!r} (make test sets it)"
        )
    _purge()  # start from empty test queues
    with django_db_blocker.unblock(), start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING"):
        yield


@pytest.fixture
def live_celery(worker):
    assert not app.conf.task_always_eager
    yield
    wait_until_idle()
