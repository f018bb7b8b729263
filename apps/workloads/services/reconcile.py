"""The periodic tick that keeps workloads moving: free orphaned claims, run admission, dispatch what it
admitted, carry out reclaims, drain the outbox, and reconcile with each backend what it runs."""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from apps.backends.base import BackendError
from apps.backends.registry import get_backend
from apps.backends.types import BackendState
from apps.tenancy.models import AdmissionState
from apps.tenancy.services.admissions import release_admission
from apps.workloads import reasons
from apps.workloads.cold_starts import record_replica_starts
from apps.workloads.models import OutboxAction, OutboxEntry, OutboxStatus, Workload, WorkloadEvent, WorkloadState
from apps.workloads.services.outbox import drain_outbox, enqueue
from apps.workloads.services.state import CLAIM_PREFIX, add_event, backend_reason, map_state, set_state

logger = logging.getLogger(__name__)

CLUSTER_EVENT = "cluster"  # a workload event the backend reported (scheduler, kubelet, controller)
ORPHAN_AFTER = timedelta(minutes=5)
# A run still going this long after its max_runtime_s is stopped by the console. Backends enforce the limit
# themselves (activeDeadlineSeconds, sbatch --time, the simulator) and say so first; this catches what they let
# go on: a Volcano Job whose restart policy starts again a pod its deadline failed, a Deployment or a
# LeaderWorkerSet (no deadline at all). Slurm needs up to KillWait (30 s) plus its periodic check to end a job.
RUNTIME_GRACE = timedelta(seconds=120)


def dispatch_admitted() -> int:
    """Pending workloads whose claim the admission pass admitted get their backend submission queued."""
    count = 0
    for workload in Workload.objects.filter(
        state=WorkloadState.PENDING, admission__state=AdmissionState.ADMITTED
    ).select_related("admission"):
        with transaction.atomic():
            if (
                Workload.objects.filter(pk=workload.pk, state=WorkloadState.PENDING).update(
                    state=WorkloadState.ADMITTED, state_reason=workload.admission.reason[:500]
                )
                == 1
            ):
                add_event(workload, "admitted", workload.admission.reason)
                enqueue(workload, OutboxAction.SUBMIT)
                count += 1
    return count


def refresh_pending_reasons() -> int:
    """Pending workloads show why they wait as their claim says now (the admission pass rewrites it: a reservation
    and its expected start, or what it waits behind), in one statement."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE workloads_workload SET state_reason = a.reason FROM tenancy_admission a "
            "WHERE workloads_workload.admission_id = a.id AND workloads_workload.state = %s AND a.state = %s "
            "AND workloads_workload.state_reason <> a.reason",
            [WorkloadState.PENDING, AdmissionState.PENDING],
        )
        return cursor.rowcount


def carry_out_reclaims() -> int:
    """Preempt the victims of reclaim plans the admission pass recorded (not online-inference: never planned)."""
    from apps.tenancy.models import Admission

    victims: set[int] = set()
    for plan in Admission.objects.filter(state=AdmissionState.PENDING, decision="reclaim").values_list(
        "reclaim_plan", flat=True
    ):
        victims.update(int(v[0]) for v in plan or [])
    count = 0
    for workload in Workload.objects.filter(
        admission_id__in=victims, state__in=[WorkloadState.ADMITTED, WorkloadState.RUNNING]
    ):
        with transaction.atomic():
            if (
                Workload.objects.filter(pk=workload.pk, state=workload.state).update(
                    state=WorkloadState.CANCELLING, state_reason=reasons.PREEMPTED_FOR_LENDER
                )
                == 1
            ):
                add_event(workload, "preempt", reasons.RECLAIMED)
                enqueue(workload, OutboxAction.PREEMPT)
                count += 1
    return count


def reconcile_workloads() -> int:
    """Ask each backend, in one call per cluster, for the state of what it runs, and record changes."""
    changed = 0
    by_cluster: dict[int, list[Workload]] = defaultdict(list)
    for workload in (
        Workload.objects.filter(state__in=[WorkloadState.ADMITTED, WorkloadState.RUNNING])
        .exclude(backend_name="")
        .select_related("cluster", "admission")
    ):
        by_cluster[workload.cluster_id].append(workload)
    now = timezone.now()
    for workloads in by_cluster.values():
        cluster = workloads[0].cluster
        # Only the backend knows a run whose own submission is done: a requeued workload's first run was
        # submitted long ago, but its new run (a new backend name) waits for its own outbox entry.
        submitted = set(
            OutboxEntry.objects.filter(
                workload__in=workloads, action=OutboxAction.SUBMIT, status=OutboxStatus.DONE
            ).values_list("workload_id", "run")
        )
        try:
            statuses = get_backend(cluster).status(
                [w.backend_name for w in workloads if (w.pk, w.requeues) in submitted]
            )
        except BackendError as exc:
            logger.warning("reconcile of %s failed: %s", cluster.name, exc)
            continue
        _record_cluster_events(workloads, statuses)
        record_replica_starts(workloads, statuses)
        for workload in workloads:
            status = statuses.get(workload.backend_name)
            if status is None:
                continue
            if status.state == BackendState.UNKNOWN:
                new_state, reason = WorkloadState.FAILED, reasons.BACKEND_FORGOT
            else:
                new_state = map_state(status.state, workload.state)
                reason = backend_reason(status.state, status.reason, workload)
            overdue = None if new_state in WorkloadState.terminal() else overdue_by(workload, now)
            if overdue is not None:
                new_state = WorkloadState.FAILED
                detail = reasons.STOPPED_BY_CONSOLE % {"seconds": int(overdue.total_seconds())}
                reason = backend_reason(BackendState.TIMED_OUT, detail, workload)
            placements = [{"node": p.node, "gpus": p.gpu_indexes} for p in status.placements]
            if not placements and new_state in WorkloadState.terminal():
                placements = workload.placements  # where it last ran: a hardware incident looks for it here
            # A new reason alone is news too: "0/4 nodes are available: ..." replaces "waiting for Kueue".
            reason_changed = bool(reason) and reason[:500] != workload.state_reason
            if new_state != workload.state or placements != workload.placements or reason_changed:
                with transaction.atomic():
                    set_state(workload, new_state, reason, placements=placements)
                    if overdue is not None:  # the backend would go on: the outbox stops its run
                        enqueue(workload, OutboxAction.CANCEL)
                changed += 1
    return changed


def overdue_by(workload: Workload, now) -> timedelta | None:
    """How long `workload`'s current run has been going, if that is past its max_runtime_s plus RUNTIME_GRACE.

    The run started when the console first saw it running, or when it was last admitted if that is later (a
    preempted run keeps its first start, and starts again once admitted).
    """
    limit = (workload.spec or {}).get("max_runtime_s")
    start = workload.started_at
    if not limit or start is None:
        return None
    admission = workload.admission if workload.admission_id else None
    if admission is not None and admission.admitted_at and admission.admitted_at > start:
        start = admission.admitted_at
    ran = now - start
    return ran if ran >= timedelta(seconds=limit) + RUNTIME_GRACE else None


def _record_cluster_events(workloads: list[Workload], statuses: dict) -> None:
    """The backend's events (e.g. Kubernetes FailedScheduling) on each workload's timeline, each line once.

    One query for the lines already recorded and one bulk insert, whatever the number of workloads.
    """
    reported = {w.pk: statuses[w.backend_name].events for w in workloads if statuses.get(w.backend_name)}
    reported = {pk: lines for pk, lines in reported.items() if lines}
    if not reported:
        return
    seen = set(
        WorkloadEvent.objects.filter(workload_id__in=reported, kind=CLUSTER_EVENT).values_list("workload_id", "message")
    )
    new = [
        WorkloadEvent(workload_id=pk, kind=CLUSTER_EVENT, message=line[:1000])
        for pk, lines in reported.items()
        for line in lines
        if (pk, line[:1000]) not in seen
    ]
    WorkloadEvent.objects.bulk_create(new)


def release_orphan_claims() -> int:
    """Claims whose submission died between the quota decision and writing the workload give their GPUs back."""
    from apps.tenancy.models import Admission

    orphans = Admission.objects.filter(
        name__startswith=CLAIM_PREFIX,
        state__in=[AdmissionState.PENDING, AdmissionState.ADMITTED],
        workload__isnull=True,
        submitted_at__lt=timezone.now() - ORPHAN_AFTER,
    )
    count = 0
    for claim in orphans:
        release_admission(claim)
        count += 1
    return count


def tick() -> dict:
    """One round of the loop that keeps workloads moving (beat runs it every few seconds)."""
    from apps.tenancy.services.admissions import run_admission_pass

    orphans = release_orphan_claims()
    admission = run_admission_pass()
    return {
        "orphans": orphans,
        "admission": admission,
        "reasons": refresh_pending_reasons(),
        "dispatched": dispatch_admitted(),
        "reclaimed": carry_out_reclaims(),
        "outbox": drain_outbox(),
        "reconciled": reconcile_workloads(),
    }
