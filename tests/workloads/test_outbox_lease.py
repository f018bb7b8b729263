"""Outbox leases (issue 23 part 7): a claim is short and renewed while its backend call runs, so a slow call is
never taken over while its worker lives and a dead worker's entry is taken over once its lease has run out;
and only an entry's first try tells the backend that nothing can have reached it yet (issue 23 part 3)."""

from __future__ import annotations

import threading
import time
from unittest import mock

import pytest
from django.db import connection

from apps.backends.simulator.backend import SimulatorBackend
from apps.workloads import services
from apps.workloads.models import OutboxEntry, OutboxStatus, Workload
from apps.workloads.services import outbox
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec

LEASE_S = 2  # the tests' lease: a heartbeat every 2/3 s


def queued_entry(personas, name: str = "job") -> OutboxEntry:
    """A submitted workload whose outbox entry no worker has taken yet (the task is never sent)."""
    with mock.patch("apps.workloads.tasks.process_outbox_task.delay"):
        workload, _ = services.submit_workload(
            fresh(personas.member_a), kind="training", spec=training_spec(name=name), idempotency_key=name
        )
    entry = OutboxEntry.objects.get(workload=workload)
    assert entry.status == OutboxStatus.PENDING and entry.attempts == 0
    return entry


def recording_submit(calls: list, delay_s: float = 0.0):
    """SimulatorBackend.submit, recording each spec's first_attempt and taking `delay_s` first (a slow sbatch)."""
    real = SimulatorBackend.submit

    def submit(self, spec):
        calls.append(spec.first_attempt)
        time.sleep(delay_s)
        return real(self, spec)

    return submit


def drained() -> int:
    with mock.patch("apps.workloads.tasks.process_outbox_task.delay"):
        return outbox.drain_outbox()


def test_the_lease_is_thirty_seconds_by_default(settings):
    assert settings.OUTBOX_LEASE_S == 30 and outbox.lease_seconds() == 30


@pytest.mark.django_db(transaction=True)  # the heartbeat renews from a thread of its own: committed rows only
def test_a_lease_renewed_during_a_slow_call_is_not_taken_over(fleet, personas, settings):
    settings.OUTBOX_LEASE_S = LEASE_S
    entry = queued_entry(personas)
    calls, results, stolen = [], [], []
    with mock.patch.object(SimulatorBackend, "submit", recording_submit(calls, delay_s=3 * LEASE_S)):
        worker = threading.Thread(target=lambda: results.append(outbox.process_outbox_entry(entry.pk)))
        worker.start()
        try:
            while not calls:  # the worker has claimed the entry and is in its backend call
                time.sleep(0.01)
            deadline = time.monotonic() + 3 * LEASE_S - 0.5
            while time.monotonic() < deadline:  # the sweep and other workers keep trying, past the lease
                stolen.append(drained())
                stolen.append(outbox._claim_entry(entry.pk))
                time.sleep(0.25)
        finally:
            worker.join()
            connection.close()
    assert results == ["submitted"] and calls == [True], (results, calls)
    assert not any(stolen), "a lease renewed by a live worker must not be taken over"
    entry.refresh_from_db()
    assert entry.status == OutboxStatus.DONE and entry.attempts == 0


def test_a_dead_workers_claim_is_taken_over_once_its_lease_ran_out(fleet, personas, settings):
    settings.OUTBOX_LEASE_S = LEASE_S
    entry = queued_entry(personas)
    # A worker claims the entry and is killed (kill -9): nothing renews the claim any more.
    assert outbox._claim_entry(entry.pk) is not None
    assert drained() == 0 and outbox._claim_entry(entry.pk) is None  # within its lease: nobody takes it
    time.sleep(LEASE_S + 0.2)
    calls = []
    with mock.patch.object(SimulatorBackend, "submit", recording_submit(calls)):
        assert drained() == 1
        assert services.process_outbox_entry(entry.pk) == "submitted"
    entry.refresh_from_db()
    # The takeover counts an attempt, and the backend is told an earlier one may have reached it.
    assert entry.status == OutboxStatus.DONE and entry.attempts == 1
    assert calls == [False]


def test_only_an_entrys_first_try_skips_the_backends_lookup(fleet, personas):
    from apps.backends.base import RetryableBackendError

    entry = queued_entry(personas)
    calls = []

    def failing(self, spec):
        calls.append(spec.first_attempt)
        raise RetryableBackendError("sbatch: error: Batch job submission failed: Socket timed out")

    with mock.patch.object(SimulatorBackend, "submit", failing):
        assert services.process_outbox_entry(entry.pk) == "retry"
    OutboxEntry.objects.filter(pk=entry.pk).update(next_attempt_at=entry.created_at)
    with mock.patch.object(SimulatorBackend, "submit", recording_submit(calls)):
        assert services.process_outbox_entry(entry.pk) == "submitted"
    assert calls == [True, False]  # the timed-out sbatch may have submitted: the retry looks the name up


def test_a_heartbeat_never_renews_a_claim_taken_over_meanwhile(fleet, personas):
    entry = queued_entry(personas)
    token = outbox._claim_entry(entry.pk)
    beat = outbox.LeaseHeartbeat(entry.pk, token, interval_s=60)
    assert beat.renew() and beat.renewals == 1 and not beat.lost
    renewed = OutboxEntry.objects.get(pk=entry.pk).claimed_at
    assert renewed == beat.claimed_at and renewed >= token
    OutboxEntry.objects.filter(pk=entry.pk).update(claimed_at=renewed.replace(year=2000))  # another worker's claim
    assert not beat.renew() and beat.lost
    assert OutboxEntry.objects.get(pk=entry.pk).claimed_at.year == 2000


def test_the_heartbeat_thread_stops_with_the_call(fleet, personas):
    entry = queued_entry(personas)
    with mock.patch.object(SimulatorBackend, "submit", recording_submit([])):
        before = {t.name for t in threading.enumerate()}
        assert services.process_outbox_entry(entry.pk) == "submitted"
    assert not {t.name for t in threading.enumerate()} - before
    assert Workload.objects.get(pk=entry.workload_id).state in {"admitted", "running"}
