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
def task():
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
