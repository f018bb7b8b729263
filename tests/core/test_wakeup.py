"""Coalesced wake-ups against the suite's real Redis broker: many wake-ups, one queued run."""

from __future__ import annotations

import pytest
from django.conf import settings

from apps.core import wakeup
from tests.conftest import set_celery_eager


class CountingTask:
    def __init__(self):
        self.queued = 0

    def delay(self):
        self.queued += 1


@pytest.fixture
def task(db):
    assert settings.CELERY_BROKER_URL.startswith("redis://"), "the suite's broker is Redis"
    set_celery_eager(False)
    wakeup.woken("test-wake")
    yield CountingTask()
    wakeup.woken("test-wake")
    set_celery_eager(True)


def test_wakeups_coalesce_until_the_task_starts(task):
    assert wakeup.wake(task, "test-wake") is True
    assert [wakeup.wake(task, "test-wake") for _ in range(5)] == [False] * 5
    assert task.queued == 1  # five more commits, no more messages: the queued run has not looked yet
    wakeup.woken("test-wake")  # the run starts: it clears the flag, then looks for work
    assert wakeup.wake(task, "test-wake") is True  # work committed from now on may be missed: queue another
    assert task.queued == 2


def test_the_flag_expires_so_a_lost_run_does_not_silence_wakeups(task):
    assert wakeup.wake(task, "test-wake", ttl_s=1)
    assert wakeup._redis().ttl(wakeup.PREFIX + "test-wake") in {0, 1}


def test_eager_mode_and_other_brokers_queue_every_time(task, settings):
    set_celery_eager(True)
    assert wakeup.wake(task, "test-wake") and wakeup.wake(task, "test-wake")
    set_celery_eager(False)
    settings.CELERY_BROKER_URL = "filesystem://"
    assert wakeup.wake(task, "test-wake") and wakeup.wake(task, "test-wake")
    assert task.queued == 4


def test_a_redis_failure_still_queues_the_task(task, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    assert wakeup.wake(task, "test-wake") is True
    assert task.queued == 1
    wakeup.woken("test-wake")  # and clearing does not raise


# The flag raised by the statement that writes the work (`raise_in_statement`), on committed rows.
LOCK = "SELECT pg_advisory_xact_lock(4243)"
KEY = "test-wake-sql"


def _write(holds: bool = True, ttl_s: int = 30):
    """An audit event written by `insert_rows_if_locked` with the flag's statement; the statement's answer."""
    from django.utils import timezone

    from apps.audit.models import AuditEvent
    from apps.core.inserts import Guard, insert_rows_if_locked

    guard = Guard("SELECT 1 AS one WHERE %s", (holds,), ("one",))
    event = AuditEvent(time=timezone.now(), actor_label="t", action="test.wake", target_type="t")
    taken = insert_rows_if_locked(LOCK, guard, event, computed={}, also={"woke": wakeup.raise_in_statement(KEY, ttl_s)})
    return None if taken is None else taken["woke"]


def _raised() -> bool:
    from apps.core.models import WakeFlag

    return WakeFlag.objects.filter(key=KEY, raised_at__isnull=False).exists()


@pytest.mark.django_db(transaction=True)
def test_the_statement_raises_the_flag_once_until_the_task_clears_it():
    assert _write() is True and _raised()  # the first writer raised it: it queues the task
    assert [_write() for _ in range(3)] == [False] * 3  # the task is queued and has not looked yet
    wakeup.woken(KEY)  # the task starts: clears the flag, then looks
    assert not _raised() and _write() is True


@pytest.mark.django_db(transaction=True)
def test_a_refusing_guard_raises_nothing_and_an_old_flag_is_raised_again():
    assert _write(holds=False) is None and not _raised()
    assert _write(ttl_s=0) is True
    assert _write(ttl_s=0) is True  # raised by an earlier transaction, now past its time: the task may be lost


@pytest.mark.django_db(transaction=True)
def test_the_task_cannot_clear_the_flag_before_a_writer_that_found_it_raised_commits():
    """The writer that left the wake-up to the queued task holds the flag's row to its COMMIT: the task's clear
    waits for it, so the task looks after the writer's work is committed."""
    import threading

    from django.db import OperationalError, connection, transaction

    assert _write() is True
    inside, release, outcome = threading.Event(), threading.Event(), []

    def writer():
        try:
            with transaction.atomic():
                outcome.append(_write())
                inside.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert inside.wait(10) and outcome == [False]
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '300ms'")
        with pytest.raises(OperationalError, match="lock timeout"):
            wakeup.woken(KEY)
        assert _raised()
    finally:
        release.set()
        thread.join(10)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    wakeup.woken(KEY)
    assert not _raised()
