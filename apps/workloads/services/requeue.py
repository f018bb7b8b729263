"""Requeue: a training job whose run ended through no doing of its own goes back to its queue as a new run.

There is one path, `requeue_workload`, whatever ended the run: a preemption (the outbox, after the backend
stopped the job to give a lender its guarantee back) or a hardware fault (the health app's runbook
actions). Either way the job gets a new admission claim and a new backend name (the backend's idempotent
submit would return the ended run under the old one), one timeline line and one audit event, in one
transaction. What differs by cause is written down in `CAUSES`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.db import transaction
from django.utils.translation import gettext as _

from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.audit.services import record_event
from apps.tenancy.services.admissions import release_admission, submit_admission
from apps.workloads import reasons
from apps.workloads.models import Workload, WorkloadKind, WorkloadState
from apps.workloads.services.state import CLAIM_PREFIX, add_event

PREEMPTION, FAULT, HUNG = "preemption", "fault", "hung"


@dataclass(frozen=True)
class Cause:
    """What a requeue for one cause of a run's end looks like."""

    from_states: frozenset[str]  # the states a job may be requeued from
    spends_retry: bool  # counts against the spec's `retries` (a preemption does; a fault is not the job's doing)
    new_run_clock: bool  # the run starts over: started_at and placements are cleared (kept after a preemption)
    state_reason: str  # template: %(reason)s the admission's reason, %(fault)s the cause's reason
    event: str  # template of the timeline line: %(run)s, %(retries)s, %(reason)s
    stops_run: bool = False  # the run still goes on at the backend: the outbox stops it (by its own run number)


CAUSES = {
    # The outbox has just marked the job preempted (its claim released with it).
    PREEMPTION: Cause(
        from_states=frozenset({WorkloadState.PREEMPTED}),
        spends_retry=True,
        new_run_clock=False,
        state_reason=reasons.REQUEUED_AFTER_PREEMPTION,
        event=reasons.REQUEUED,
    ),
    # The job died on a faulty GPU, or the backend still reports it placed there.
    FAULT: Cause(
        from_states=frozenset({WorkloadState.RUNNING, WorkloadState.ADMITTED, WorkloadState.FAILED}),
        spends_retry=False,
        new_run_clock=True,
        state_reason=reasons.REQUEUED_AFTER_FAULT,
        event=reasons.REQUEUED_FAULT_EVENT,
    ),
    # The health automation found the run hung (apps/health/hung.py); the caller stops the old run through the outbox.
    # A hang may be the job's own bug (a deadlocked loader): it spends a retry, so a job that always hangs stops.
    HUNG: Cause(
        from_states=frozenset({WorkloadState.RUNNING}),
        spends_retry=True,
        new_run_clock=True,
        state_reason=reasons.REQUEUED_AFTER_HANG,
        event=reasons.REQUEUED_HANG_EVENT,
        stops_run=True,
    ),
}


def requeue_workload(actor, workload: Workload, *, cause: str, reason: str) -> Workload | None:
    """Send a training job back to its queue as a new run (same spec; a checkpointing job resumes from its
    CHECKPOINT_PATH). `cause` is PREEMPTION, FAULT or HUNG, `reason` what ended the run (the audit event's reason).
    `actor` None is the system (the outbox, the health automation); a person needs on-call or platform-admin.
    Returns the requeued workload, or None when there is nothing to requeue (not a training job, not in a
    state the cause requeues from, no retries left, or its run was stopped by its runtime limit)."""
    how = CAUSES[cause]
    if actor is not None:
        require(actor, Action.OPERATE, None, _("Requeueing after a fault needs on-call or platform-admin."))
    if workload.kind != WorkloadKind.TRAINING:
        return None
    with transaction.atomic():
        locked = Workload.objects.select_for_update().select_related("tenant").get(pk=workload.pk)
        retries = int(locked.spec.get("retries", 0) or 0)
        if locked.state not in how.from_states or (how.spends_retry and locked.requeues >= retries):
            return None
        if locked.stopped_by_runtime_limit:  # its limit ended the run, whatever happened to the GPU after
            return None
        before = locked.state
        if locked.admission_id and before not in WorkloadState.terminal():
            release_admission(locked.admission)  # a terminal state released it already
        claim = submit_admission(
            name=f"{CLAIM_PREFIX}{locked}",
            queue=locked.queue,
            gpu_model=locked.gpu_model,
            # The same exact share as the run before (a 1/7 MIG slice stays 1/7 of a GPU of quota), on its cluster.
            gpus=locked.admission.gpus if locked.admission_id else max(math.ceil(locked.gpus), 1),
            tier=locked.tier,
            user=locked.created_by.get_username() if locked.created_by else "",
            clusters=[locked.cluster],
            max_runtime_s=(locked.spec or {}).get("max_runtime_s"),
        )
        if how.stops_run:
            from apps.workloads.models import OutboxAction
            from apps.workloads.services.outbox import enqueue

            enqueue(locked, OutboxAction.CANCEL)  # written for this run: it stops this run, whatever comes next
        locked.requeues += 1
        locked.admission = claim
        locked.backend_name = locked.run_name(locked.requeues)
        locked.state, locked.finished_at = WorkloadState.PENDING, None
        fields = ["requeues", "admission", "backend_name", "state", "finished_at", "state_reason", "updated_at"]
        if how.new_run_clock:
            locked.started_at, locked.placements = None, []
            fields += ["started_at", "placements"]
        locked.state_reason = (how.state_reason % {"fault": reason, "reason": claim.reason})[:500]
        locked.save(update_fields=fields)
        # Run numbers as each cause has always shown them: "requeued (1 of 2)" spends retry 1 of 2; a fault's
        # line names the run that starts now.
        run = locked.requeues if how.spends_retry else locked.requeues + 1
        add_event(locked, "requeue", how.event % {"run": run, "retries": retries, "reason": reason})
        record_event(
            actor,
            "workload.requeue",
            locked,
            tenant=locked.tenant,
            reason=reason,
            before={"state": before},
            after={"state": locked.state, "requeues": locked.requeues, "backend_name": locked.backend_name},
        )
    return locked
