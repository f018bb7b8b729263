"""The outbox: the only place that calls backends for workloads.

A change that needs the backend (submit, cancel, preempt) writes an outbox row in its own transaction; the
commit wakes a drain, which queues one task per due row. The task claims its row by compare-and-set, calls
the backend outside any transaction, and records the outcome (retryable errors back off, others fail it).
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.backends.base import BackendError, NotFoundError
from apps.backends.registry import get_backend
from apps.core.inserts import insert_row
from apps.core.wakeup import wake
from apps.workloads import reasons
from apps.workloads.models import OutboxAction, OutboxEntry, OutboxStatus, Workload, WorkloadState
from apps.workloads.services.requeue import PREEMPTION, requeue_workload
from apps.workloads.services.state import add_event, backend_reason, map_state, set_state
from apps.workloads.submission_context import catalog

MAX_BACKOFF_S = 300
OUTBOX_WAKE = "workloads-outbox"


def enqueue(workload: Workload, action: str) -> OutboxEntry:
    """Write an outbox row for `workload` now (inside the caller's transaction)."""
    return insert_row(outbox_row(workload, action))


def outbox_row(workload: Workload, action: str) -> OutboxEntry:
    """An outbox row (unsaved) for the caller's transaction; its commit wakes the drain."""
    transaction.on_commit(wake_outbox)
    return OutboxEntry(workload=workload, action=action, run=workload.requeues, next_attempt_at=timezone.now())


def wake_outbox() -> None:
    """After a commit that left outbox rows: queue one drain unless one is already queued (apps/core/wakeup.py)."""
    from apps.workloads.tasks import drain_outbox_task

    wake(drain_outbox_task, OUTBOX_WAKE)


def drain_outbox(limit: int = 500) -> int:
    """Queue a task per due entry: new ones, ones whose backoff is over, ones whose worker died holding them."""
    from apps.workloads.tasks import process_outbox_task

    now = timezone.now()
    lease = now - timedelta(seconds=OutboxEntry.LEASE_SECONDS)
    due = list(
        OutboxEntry.objects.filter(
            Q(status=OutboxStatus.PENDING, next_attempt_at__lte=now)
            | Q(status=OutboxStatus.PROCESSING, claimed_at__lt=lease)
        ).values_list("id", flat=True)[:limit]
    )
    for entry_id in due:
        process_outbox_task.delay(entry_id)
    return len(due)


def _claim_entry(entry_id: int) -> bool:
    now = timezone.now()
    lease = now - timedelta(seconds=OutboxEntry.LEASE_SECONDS)
    due = Q(status=OutboxStatus.PENDING, next_attempt_at__lte=now) | Q(
        status=OutboxStatus.PROCESSING, claimed_at__lt=lease
    )
    return OutboxEntry.objects.filter(due, pk=entry_id).update(status=OutboxStatus.PROCESSING, claimed_at=now) == 1


def process_outbox_entry(entry_id: int) -> str:
    """Carry out one outbox entry against the backend. Returns what happened (for logs and tests)."""
    if not _claim_entry(entry_id):
        return "skipped"
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
        if workload.state in WorkloadState.terminal():  # already ended here (past its runtime limit): stop only
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
