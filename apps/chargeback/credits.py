"""Fault credits: opened from the runs health recorded as lost, settled from metered usage (the interrupted
run's GPU time since its start or last checkpoint).

A credit is created pending (services.credit_interruptions) with the interruption instant in the
backend's clock: by hand (API), or from the health app's records of runs a fault cost (`health.LostRun`),
which chargeback pulls when it settles credits (`credit_lost_runs`; health knows nothing of chargeback).
Once the cluster's usage is metered past that instant, the run is read back from the workload's usage
records: the contiguous chain of records of one run (when the backend reports runs) ending at or before
the interruption (a gap, another run, an earlier credited interruption or the last checkpoint ends the
walk back). Its GPU-seconds are the credit, priced by the rate card in force at the interruption.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from decimal import Decimal
from fractions import Fraction

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from apps.audit.services import record_event
from apps.chargeback.fractions import SECOND_PLACES, exact_seconds, to_decimal
from apps.chargeback.models import Credit, CreditState, MeterWatermark, Period, UsageRecord
from apps.chargeback.rates import RateBook
from apps.core.errors import ServiceError
from apps.health.models import LostRun

logger = logging.getLogger(__name__)
# A lost run's outcome (shown on the incident's page with the others, stored in English like them).
NO_CREDIT_RUNTIME_LIMIT = "no credit: its runtime limit (max_runtime_s) ended the run, not the fault"


def credit_lost_runs() -> int:
    """Open a pending credit for each run health recorded as lost to a fault and chargeback has not taken yet.

    The runs one operation recorded for one incident at one instant become one `credit_interruptions` call (one
    audit event, by whoever handled the fault), as when health called it. Each record is marked taken with
    what came of it, a refusal included (e.g. its period is closed): the fault's handling went on without
    waiting for chargeback. Returns how many credits were opened.
    """
    from apps.chargeback.services import credit_interruptions

    opened = 0
    with transaction.atomic():
        lost = list(
            LostRun.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(taken_at__isnull=True)
            .select_related("cluster", "actor")
            .order_by("id")
        )
        limited = _stopped_by_runtime_limit(lost)
        if limited:
            LostRun.objects.filter(pk__in=[r.pk for r in limited]).update(
                taken_at=timezone.now(), outcome=NO_CREDIT_RUNTIME_LIMIT[:300]
            )
            lost = [r for r in lost if r not in limited]
        groups: dict[tuple, list[LostRun]] = defaultdict(list)
        for run in lost:
            groups[(run.cluster_id, run.interrupted_at, run.incident_id, run.reason, run.actor_id)].append(run)
        for runs in groups.values():
            first = runs[0]
            try:
                credits = credit_interruptions(
                    first.actor,
                    cluster=first.cluster,
                    backend_ids=[r.backend_id for r in runs],
                    interrupted_at=first.interrupted_at,
                    reason=first.reason,
                    incident_ref=f"#{first.incident_id}",
                    incident_url=reverse("health:incident_detail", args=[first.incident_id]),
                )
                outcome = f"{len(credits)} credit(s) opened"
                opened += len(credits)
            except ServiceError as exc:  # e.g. the period is already closed
                logger.warning("no credit for %d run(s) lost on %s: %s", len(runs), first.cluster.name, exc.message)
                outcome = f"no credit: {exc.message}"
            LostRun.objects.filter(pk__in=[r.pk for r in runs]).update(taken_at=timezone.now(), outcome=outcome[:300])
    return opened


def _stopped_by_runtime_limit(lost: list[LostRun]) -> list[LostRun]:
    """The records of runs that their runtime limit had already stopped when health recorded them: the limit ended
    the run (Kubernetes DeadlineExceeded, Slurm TIMEOUT), not the fault, so nobody is credited for it. Health does
    not record such runs (the backend reports them timed out); this holds whoever recorded one. A run the fault cut
    short before it timed out (recorded before its end) keeps its credit."""
    from apps.chargeback.metering import console_workloads

    by_cluster: dict[int, list[LostRun]] = defaultdict(list)
    for run in lost:
        by_cluster[run.cluster_id].append(run)
    out = []
    for runs in by_cluster.values():
        workloads = console_workloads(runs[0].cluster, {r.backend_id for r in runs})
        for run in runs:
            workload = workloads.get(run.backend_id)
            if (
                workload is not None
                and workload.run_name(workload.requeues) == run.backend_id  # its latest run: the state is this run's
                and workload.stopped_by_runtime_limit
                and workload.finished_at is not None
                and run.created_at >= workload.finished_at
            ):
                out.append(run)
    return out


def lost_run(
    credit: Credit, records: list[UsageRecord], floor=None, going_on: set | frozenset = frozenset()
) -> tuple[Decimal, Decimal, object]:
    """(GPU-seconds, GPUs, run start) of the run the interruption ended, from the workload's records.

    `going_on`: runs (by start) that still have usage after the interruption, i.e. a restart, not the
    run that was cut short.
    """
    chain = sorted(
        (
            r
            for r in records
            if r.end <= credit.interrupted_at and (r.run_started_at is None or r.run_started_at not in going_on)
        ),
        key=lambda r: r.start,
        reverse=True,
    )
    limit = max((t for t in (floor, credit.checkpoint_at) if t is not None), default=None)
    total, gpus, start, previous_start = Decimal(0), Decimal(0), None, None
    run = chain[0].run_started_at if chain else None
    for record in chain:
        if previous_start is not None and record.end != previous_start:
            break  # a gap: the run started at previous_start
        if run is not None and record.run_started_at != run:
            break  # the previous run, ended exactly where this one started
        if limit is not None and record.end <= limit:
            break
        if limit is not None and record.start < limit:
            part = exact_seconds(record.end - limit) / exact_seconds(record.end - record.start)
            total += to_decimal(part * Fraction(record.gpu_seconds), SECOND_PLACES)
            start = limit
            gpus = max(gpus, record.gpus)
            break
        total += record.gpu_seconds
        gpus = max(gpus, record.gpus)
        start = previous_start = record.start
    return total, gpus, start


def settle_credits(period: Period | None = None) -> int:
    """Settle pending credits whose cluster is metered past the interruption (first opening those of runs health
    recorded as lost since the last time). Returns how many were settled."""
    credit_lost_runs()
    pending = Credit.objects.filter(state=CreditState.PENDING)
    if period is not None:
        pending = pending.filter(period=period)
    marks = dict(MeterWatermark.objects.values_list("cluster_id", "metered_until"))
    ready = [c for c in pending if (marks.get(c.cluster_id) or c.interrupted_at) > c.interrupted_at]
    if not ready:
        return 0
    book = RateBook()
    with transaction.atomic():
        for credit in ready:
            same = {"cluster_id": credit.cluster_id, "backend_id": credit.backend_id}
            records = list(UsageRecord.objects.filter(**same, start__lt=credit.interrupted_at))
            floor = (
                Credit.objects.filter(**same, interrupted_at__lt=credit.interrupted_at)
                .order_by("-interrupted_at")
                .values_list("interrupted_at", flat=True)
                .first()
            )
            going_on = set(
                UsageRecord.objects.filter(**same, end__gt=credit.interrupted_at, run_started_at__isnull=False)
                .values_list("run_started_at", flat=True)
                .distinct()
            )
            seconds, gpus, start = lost_run(credit, records, floor, going_on)
            credit.gpu_seconds, credit.gpus, credit.run_started_at = seconds, gpus, start
            credit.rate_card = book.card_for(credit.gpu_model_id, credit.tier_id, credit.interrupted_at)
            credit.state = CreditState.SETTLED
            credit.save(update_fields=["gpu_seconds", "gpus", "run_started_at", "rate_card", "state"])
        record_event(
            None,
            "chargeback.credit.settle",
            target_type="chargeback.credit",
            target_id=",".join(str(c.pk) for c in ready)[:100],
            target_label=f"{len(ready)} credit(s) settled",
            after={str(c.pk): {"gpu_seconds": c.gpu_seconds, "run_started_at": c.run_started_at} for c in ready},
        )
    return len(ready)
