"""The outbox: the only place that calls backends for workloads.

A change that needs the backend (submit, cancel, preempt) writes an outbox row in its own transaction; the
commit wakes a drain, which queues one task per due row. The task claims its row by compare-and-set, calls
the backend outside any transaction, and records the outcome (retryable errors back off, others fail it).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, F, PositiveIntegerField, Q, When
from django.utils import timezone

from apps.backends.base import BackendError, NotFoundError
from apps.backends.registry import get_backend
from apps.core.inserts import insert_row
from apps.core.wakeup import raise_in_statement, wake, wake_if_raised
from apps.workloads import reasons
from apps.workloads.models import OutboxAction, OutboxEntry, OutboxStatus, Workload, WorkloadState
from apps.workloads.services.requeue import PREEMPTION, requeue_workload
from apps.workloads.services.state import add_event, backend_reason, map_state, set_state
from apps.workloads.submission_context import catalog

MAX_BACKOFF_S = 30  # a retry at least every 30 s: the end of a backend outage is noticed within a tick of it
OUTBOX_WAKE = "workloads-outbox"
log = logging.getLogger(__name__)


def lease_seconds() -> int:
    """How long a claim lasts without renewal (settings.OUTBOX_LEASE_S)."""
    return settings.OUTBOX_LEASE_S


def enqueue(workload: Workload, action: str) -> OutboxEntry:
    """Write an outbox row for `workload` now (inside the caller's transaction)."""
    return insert_row(outbox_row(workload, action))


def outbox_row(workload: Workload, action: str, *, wake: bool = True) -> OutboxEntry:
    """An outbox row (unsaved) for the caller's transaction; its commit wakes the drain. `wake=False`: the caller
    wakes it once it knows the row is written (a row built before its transaction: `wake_after_commit`, or the flag
    raised by the statement that writes it, `wake_in_statement`)."""
    if wake:
        wake_after_commit()
    return OutboxEntry(workload=workload, action=action, run=workload.requeues, next_attempt_at=timezone.now())


def wake_after_commit() -> None:
    """The drain is woken once the caller's transaction commits (its outbox rows are then visible)."""
    transaction.on_commit(wake_outbox)


def wake_in_statement() -> dict[str, tuple[str, tuple]]:
    """For a caller that writes its outbox row in one statement (`insert_rows_if_locked`'s `also`): the drain's
    wake-up flag raised by that statement, so the request needs no round trip to Redis. Pass the returned row's
    `woke` to `wake_after_commit_if_raised`."""
    return {"woke": raise_in_statement(OUTBOX_WAKE)}


def wake_after_commit_if_raised(raised: bool) -> None:
    """Once the caller's transaction commits (now, outside one): queue the drain if the statement raised its flag."""
    from apps.workloads.tasks import drain_outbox_task

    transaction.on_commit(lambda: wake_if_raised(drain_outbox_task, raised))


def wake_outbox() -> None:
    """After a commit that left outbox rows: queue one drain unless one is already queued (apps/core/wakeup.py)."""
    from apps.workloads.tasks import drain_outbox_task

    wake(drain_outbox_task, OUTBOX_WAKE)


def drain_outbox(limit: int = 500) -> int:
    """Queue a task per due entry: new ones, ones whose backoff is over, ones whose worker died holding them."""
    from apps.workloads.tasks import process_outbox_task

    now = timezone.now()
    lease = now - timedelta(seconds=lease_seconds())
    due = list(
        OutboxEntry.objects.filter(
            Q(status=OutboxStatus.PENDING, next_attempt_at__lte=now)
            | Q(status=OutboxStatus.PROCESSING, claimed_at__lt=lease)
        ).values_list("id", flat=True)[:limit]
    )
    for entry_id in due:
        process_outbox_task.delay(entry_id)
    return len(due)


def _claim_entry(entry_id: int) -> datetime | None:
    """Claim the entry if it is due (compare-and-set): its claim time, the lease's token, or None.

    Taking over a claim whose lease ran out counts as an attempt: its worker may have reached the backend."""
    now = timezone.now()
    lease = now - timedelta(seconds=lease_seconds())
    due = Q(status=OutboxStatus.PENDING, next_attempt_at__lte=now) | Q(
        status=OutboxStatus.PROCESSING, claimed_at__lt=lease
    )
    taken_over = Case(
        When(status=OutboxStatus.PROCESSING, then=F("attempts") + 1),
        default=F("attempts"),
        output_field=PositiveIntegerField(),
    )
    claimed = OutboxEntry.objects.filter(due, pk=entry_id).update(
        status=OutboxStatus.PROCESSING, claimed_at=now, attempts=taken_over
    )
    return now if claimed == 1 else None


class LeaseHeartbeat:
    """Renews a claim every third of the lease while the backend call runs, in a thread of its own (with its own
    database connection, closed when it stops). The renewal is a compare-and-set on the claim time it last
    wrote: a claim taken over meanwhile is never renewed (the heartbeat stops and logs it)."""

    def __init__(self, entry_id: int, claimed_at: datetime, interval_s: float | None = None):
        self.entry_id, self.claimed_at = entry_id, claimed_at
        self.interval_s = lease_seconds() / 3 if interval_s is None else interval_s
        self.renewals = 0
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"outbox-lease-{entry_id}", daemon=True)

    def __enter__(self) -> LeaseHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval_s):
                if not self.renew():
                    return
        finally:
            connection.close()  # this thread's own connection

    def renew(self) -> bool:
        now = timezone.now()
        try:
            with transaction.atomic():
                if connection.vendor == "postgresql":  # never wait long on a row lock: try at the next beat
                    with connection.cursor() as cursor:
                        cursor.execute("SET LOCAL lock_timeout = '2s'")
                renewed = OutboxEntry.objects.filter(
                    pk=self.entry_id, status=OutboxStatus.PROCESSING, claimed_at=self.claimed_at
                ).update(claimed_at=now)
        except Exception:  # the database is out of reach: try again at the next beat, the lease may still hold
            log.warning("outbox entry %s: lease renewal failed", self.entry_id, exc_info=True)
            connection.close()
            return True
        if renewed != 1:
            self.lost = True
            log.warning("outbox entry %s: lease lost (taken over or finished elsewhere)", self.entry_id)
            return False
        self.claimed_at = now
        self.renewals += 1
        return True


def process_outbox_entry(entry_id: int) -> str:
    """Carry out one outbox entry against the backend. Returns what happened (for logs and tests)."""
    claimed_at = _claim_entry(entry_id)
    if claimed_at is None:
        return "skipped"
    with LeaseHeartbeat(entry_id, claimed_at):
        return _process_claimed(entry_id)


def _process_claimed(entry_id: int) -> str:
    entry = OutboxEntry.objects.select_related(
        "workload__cluster", "workload__tier", "workload__tenant", "workload__queue__tenant", "workload__gpu_model"
    ).get(pk=entry_id)
    workload = entry.workload
    backend = get_backend(workload.cluster)
    try:
        if entry.action == OutboxAction.SUBMIT:
            if (
                workload.state in WorkloadState.terminal()
                or workload.state == WorkloadState.CANCELLING
                or entry.run != workload.requeues  # an earlier run's submit: the workload was requeued since
            ):
                return _finish_entry(entry, "superseded")
            from apps.workloads.rendering import render_context
            from apps.workloads.specs import parse_spec, to_backend_spec

            parsed = parse_spec(workload.kind, workload.spec, catalog())
            backend_spec = to_backend_spec(parsed, workload.tier.value)
            backend_spec.name = workload.backend_name
            # The backend renders the typed spec in this context (the workload page shows the same rendering).
            backend_spec.context = render_context(workload)
            # No earlier try of this entry can have reached the backend: it may skip its by-name lookup.
            backend_spec.first_attempt = entry.attempts == 0
            result = backend.submit(backend_spec)
            with transaction.atomic():
                where = {"cluster": workload.cluster.name, "backend_id": result.backend_id}
                where.update(backend_state=result.state.value, reason=result.reason)
                line = reasons.SUBMITTED_TO_WHY if (result.reason or "").strip() else reasons.SUBMITTED_TO
                add_event(workload, "backend", (line % where).strip())
                reason = backend_reason(result.state, result.reason, workload)
                set_state(workload, map_state(result.state, workload.state), reason)
                _finish_entry(entry, "done")
            return "submitted"
        # cancel / preempt
        with contextlib.suppress(NotFoundError):  # never reached the backend, or already gone: nothing to stop
            # The run the entry was written for (a stop after the runtime limit may outlive a requeue).
            backend.cancel(workload.backend_name if entry.run == workload.requeues else workload.run_name(entry.run))
        if workload.state in WorkloadState.terminal() or entry.run != workload.requeues:
            # already ended here (past its runtime limit), or an earlier run's stop (a hung run requeued): stop only
            return _finish_entry(entry, "stopped")
        with transaction.atomic():
            final = WorkloadState.PREEMPTED if entry.action == OutboxAction.PREEMPT else WorkloadState.CANCELLED
            set_state(workload, final, workload.state_reason)
            _finish_entry(entry, "done")
            if entry.action == OutboxAction.PREEMPT:  # a training job with retries left goes back to its queue
                requeue_workload(None, workload, cause=PREEMPTION, reason=workload.state_reason)
        return entry.action
    except BackendError as exc:
        return _backend_failed(entry, workload, exc)


def _finish_entry(entry: OutboxEntry, outcome: str) -> str:
    OutboxEntry.objects.filter(pk=entry.pk).update(status=OutboxStatus.DONE, done_at=timezone.now())
    return outcome


def _backend_failed(entry: OutboxEntry, workload: Workload, exc: BackendError) -> str:
    if exc.retryable:
        delay = min(2**entry.attempts * 2, MAX_BACKOFF_S)
        OutboxEntry.objects.filter(pk=entry.pk).update(
            status=OutboxStatus.PENDING,
            attempts=entry.attempts + 1,
            last_error=str(exc)[:2000],
            next_attempt_at=timezone.now() + timedelta(seconds=delay),
            claimed_at=None,
        )
        retry = {"error": exc, "attempt": entry.attempts + 1, "delay": delay}
        add_event(workload, "backend-retry", reasons.BACKEND_RETRY % retry)
        return "retry"
    with transaction.atomic():
        OutboxEntry.objects.filter(pk=entry.pk).update(
            status=OutboxStatus.FAILED, last_error=str(exc)[:2000], done_at=timezone.now()
        )
        if entry.action == OutboxAction.SUBMIT:
            set_state(workload, WorkloadState.FAILED, reasons.BACKEND_REFUSED % {"error": exc})
    return "failed"
