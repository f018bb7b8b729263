"""How a workload's state moves: the compare-and-set transition, the timeline line it leaves, the backend's
states mapped onto the console's. Shared by the outbox, reconcile and requeue; no backend call here."""

from __future__ import annotations

from django.utils import timezone

from apps.backends.types import BackendState
from apps.core.inserts import insert_row
from apps.tenancy.services.admissions import release_admission
from apps.workloads import reasons
from apps.workloads.models import Workload, WorkloadEvent, WorkloadState

# Claims made for workloads carry this prefix, so the sweep can tell one whose workload never got written.
CLAIM_PREFIX = "workload:"


def add_event(workload: Workload, kind: str, message: str) -> None:
    """One line on the workload's timeline."""
    insert_row(event_row(workload, kind, message))


def event_row(workload: Workload, kind: str, message: str) -> WorkloadEvent:
    """A timeline line (unsaved), for a caller that inserts several rows in one statement."""
    return WorkloadEvent(workload=workload, kind=kind, message=message[:1000])


def map_state(state: BackendState, current: str) -> str:
    """The console's state for what the backend reports (`current` when it reports nothing the console tracks)."""
    return {
        BackendState.PENDING: WorkloadState.ADMITTED,
        BackendState.RUNNING: WorkloadState.RUNNING,
        BackendState.SUCCEEDED: WorkloadState.SUCCEEDED,
        BackendState.FAILED: WorkloadState.FAILED,
        BackendState.TIMED_OUT: WorkloadState.FAILED,  # the reason says it was the limit (backend_reason)
        BackendState.CANCELLED: WorkloadState.CANCELLED,
        BackendState.PREEMPTED: WorkloadState.PREEMPTED,
    }.get(state, current)


def backend_reason(state: BackendState, reason: str, workload: Workload) -> str:
    """The reason to record for what the backend reports: a run its runtime limit stopped says so first, in the
    console's words (however the backend put it: DeadlineExceeded, TIMEOUT), then the backend's own."""
    if state != BackendState.TIMED_OUT:
        return reason
    limit = (workload.spec or {}).get("max_runtime_s")
    return reasons.RUNTIME_LIMIT_REACHED % {"max_runtime": limit, "detail": reason or state.value}


def set_state(workload: Workload, state: str, reason: str = "", placements=None) -> None:
    """Move a workload to `state` (compare-and-set on the old state); a terminal one releases its quota."""
    now = timezone.now()
    fields = {"state": state, "state_reason": (reason or "")[:500], "updated_at": now}
    if state == WorkloadState.RUNNING and not workload.started_at:
        fields["started_at"] = now
    if state in WorkloadState.terminal():
        fields["finished_at"] = now
    if placements is not None:
        fields["placements"] = placements
    if Workload.objects.filter(pk=workload.pk, state=workload.state).update(**fields) != 1:
        return
    if workload.state != state:
        change = {"from_state": workload.state, "to_state": state, "reason": reason}
        add_event(workload, "state", (reasons.STATE_CHANGED_WHY if reason else reasons.STATE_CHANGED) % change)
    for key, value in fields.items():
        setattr(workload, key, value)
    if state in WorkloadState.terminal() and workload.admission_id:
        release_admission(workload.admission)
