"""The schedule lease of Celery beat (apps/operations/beat.py): one holder at a time, on the database's clock, and
a scheduler that sends only while its own clock says the lease it last took is still running."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from celery import beat as celery_beat
from django.db.models.functions import Now

from apps.operations import beat
from apps.operations.models import SchedulerLease
from console.celery import app

pytestmark = pytest.mark.django_db


@pytest.fixture
def lease():
    beat.ensure_lease_row()
    beat.ensure_lease_row()  # idempotent: every scheduler runs it at start
    return SchedulerLease.objects.get()


def test_one_holder_at_a_time(lease):
    assert beat.try_acquire("a", 15)
    assert not beat.try_acquire("b", 15)
    first = SchedulerLease.objects.get()
    assert first.holder == "a" and first.acquired_at is not None
    assert beat.try_acquire("a", 15)  # renewed: the same holder, acquired when it first took it
    assert SchedulerLease.objects.get().acquired_at == first.acquired_at
    assert SchedulerLease.objects.get().expires_at > first.expires_at


def test_an_expired_lease_goes_to_the_next_and_a_released_one_at_once(lease):
    assert beat.try_acquire("a", 15)
    SchedulerLease.objects.update(expires_at=Now() - timedelta(seconds=1))  # the database's clock decides
    assert beat.try_acquire("b", 15)
    assert not beat.try_acquire("a", 15)
    assert not beat.release("a")  # not the holder: nothing changes
    assert beat.release("b")
    assert beat.try_acquire("a", 15)
    assert SchedulerLease.objects.get().holder == "a"


def test_the_lease_is_one_row():
    beat.ensure_lease_row()
    assert SchedulerLease.objects.count() == 1


def scheduler() -> beat.LeasedDatabaseScheduler:
    return beat.LeasedDatabaseScheduler(app=app, lazy=True)


def test_a_scheduler_sends_only_while_its_lease_runs(lease, monkeypatch):
    sent = []
    monkeypatch.setattr(celery_beat.Scheduler, "apply_entry", lambda self, entry, producer=None: sent.append(entry))
    tick = SimpleNamespace(name="workloads-tick")
    active, standby = scheduler(), scheduler()
    active.refresh_lease()
    standby.refresh_lease()
    assert active.holds_lease() and not standby.holds_lease()
    active.apply_entry(tick)
    standby.apply_entry(tick)
    assert sent == [tick]
    # Frozen past its lease (SIGSTOP, a paused VM): its own clock says the lease is over, so nothing leaves.
    now = beat.time.monotonic()
    monkeypatch.setattr(beat.time, "monotonic", lambda: now + active.lease_s)
    assert not active.holds_lease()
    active.apply_entry(tick)
    assert sent == [tick]
    # Meanwhile the lease expired in the database and the standby took it: the thawed one stays a standby.
    SchedulerLease.objects.update(expires_at=Now() - timedelta(seconds=1))
    standby.refresh_lease()
    active.refresh_lease()
    assert standby.holds_lease() and not active.holds_lease()


@pytest.mark.django_db(transaction=True)  # closing syncs the schedule, which drops a connection inside a transaction
def test_a_scheduler_that_stops_hands_the_lease_back(lease):
    active, standby = scheduler(), scheduler()
    active.refresh_lease()
    active.close()
    standby.refresh_lease()
    assert standby.holds_lease()
