"""Admission of workloads against quota: submit a claim, run the ordered pass, release, preview."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from fractions import Fraction

from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.audit.services import record_event
from apps.backends.shares import to_units
from apps.core.bulk import bulk_update_fast
from apps.core.errors import InvalidInput
from apps.core.inserts import insert_row
from apps.fleet.models import Cluster, GpuModel
from apps.tenancy.admission import Decision, Request, Result, Snapshot, admission_pass, rebalance
from apps.tenancy.models import Admission, AdmissionState, PriorityTier, Queue
from apps.tenancy.placement import place

# Admission decisions read many rows and write a few: they are taken one at a time under this
# transaction-level lock (no backend call inside), released when the deciding transaction ends.
ADMISSION_LOCK_SQL = "SELECT pg_advisory_xact_lock(4243)"


def _serialize() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(ADMISSION_LOCK_SQL)


def _request(
    queue: Queue,
    gpu_model: GpuModel,
    gpus: int | Fraction,
    tier: PriorityTier,
    gang: int,
    user: str,
    *,
    max_runtime_s: int | None = None,
    name: str = "",
) -> Request:
    """The engine's request. `gpus` is the exact share: whole GPUs (int) or a Fraction (3/7 for three 1g.10gb)."""
    from apps.tenancy.admission import Tier

    if not isinstance(gpus, int | Fraction) or isinstance(gpus, bool) or gpus <= 0:
        raise InvalidInput(_("Ask for at least one GPU."), {"gpus": _("1 or more.")})
    if not isinstance(gang, int) or isinstance(gang, bool) or gang < 1:
        raise InvalidInput(_("A gang is at least one worker."), {"gang": _("1 or more.")})
    return Request(
        queue.pk,
        gpu_model.code,
        to_units(gpus),
        Tier(tier.name, tier.value, tier.preemptible, tier.may_borrow),
        gang,
        user,
        max_runtime_s=max_runtime_s,
        name=name,
    )


def _candidates(queue: Queue, clusters: list[Cluster] | None) -> list[Cluster]:
    """Where the request may run: the clusters given (the submission's), or every cluster the queue is bound to."""
    if clusters is not None:
        return list(clusters)
    return list(Cluster.objects.filter(queue_bindings__queue=queue).order_by("name"))


@dataclass
class DryRun:
    """What deciding a claim now would do, decided by the code a submission runs (`decide_claim`), nothing written.

    `reason` is what the claim (and so its workload's state_reason) would be stored with; `start_reason` what the
    next admission pass would write on it when it waits at the head of its queue (with its expected start: the
    pass's reservation, apps/tenancy/reservations.py), else the same. `lenders` name the queues it would borrow
    from ("acme-vision/train"; POOL for unguaranteed capacity), with the units from each."""

    decision: Decision
    reason: str
    cluster: Cluster | None
    borrow: dict[int, int] = field(default_factory=dict)
    lenders: list[tuple[str | int, int]] = field(default_factory=list)
    reclaim: list[tuple[int, int]] = field(default_factory=list)
    expected_start: datetime | None = None
    start_reason: str = ""
    free_in_guarantee: int = 0  # units of the queue's guarantee free now
    guaranteed: int = 0  # units
    unit: int = 1  # units per GPU

    @property
    def admitted(self) -> bool:
        return self.decision in {Decision.ADMIT, Decision.BORROW}


def _place(request: Request, candidates: list[Cluster], tier: PriorityTier, lock_sql: str | None):
    """The snapshot a decision reads (taking the admission lock first with `lock_sql`) and where placement puts
    `request` on it: the one decision a submission and its dry run share."""
    from apps.tenancy.snapshot import build_decision_snapshot

    snapshot = build_decision_snapshot(request.model, request.queue, lock_sql=lock_sql, tier_value=tier.value)
    snapshot.now = timezone.now()
    return snapshot, place(snapshot, request, [c.pk for c in candidates])


def dry_run_claim(
    actor,
    *,
    queue: Queue,
    gpu_model: GpuModel,
    gpus: int | Fraction,
    tier: PriorityTier,
    gang: int = 1,
    user: str = "",
    clusters: list[Cluster] | None = None,
    max_runtime_s: int | None = None,
    name: str = "",
) -> DryRun:
    """What `decide_claim` with these arguments would decide now, without the admission lock and writing nothing.

    The same request, candidates, snapshot and placement as `decide_claim` (tests/tenancy/test_dry_run.py holds
    them to the same answer over generated fleets); a claim that would wait at the head of its queue also gets
    the reservation the next admission pass would give it."""
    from apps.tenancy.admission import POOL, plan_reservation

    require(actor, Action.VIEW, queue.tenant, _("You may not view tenant %(slug)s.") % {"slug": queue.tenant.slug})
    request = _request(queue, gpu_model, gpus, tier, gang, user, max_runtime_s=max_runtime_s, name=name)
    candidates = _candidates(queue, clusters)
    snapshot, placed = _place(request, candidates, tier, lock_sql=None)
    result = placed.result
    reservation, start_reason = None, placed.reason[:500]
    if result.decision in {Decision.QUEUE, Decision.RECLAIM}:
        reservation, waiting = plan_reservation(snapshot, replace(request, cluster=placed.cluster), result)
        if waiting != result.reason:  # the pass writes the decision's own reason (without placement's comparison)
            start_reason = waiting[:500]
    quota = snapshot.quotas.get((request.queue, request.model))
    return DryRun(
        decision=result.decision,
        reason=placed.reason[:500],
        cluster=next((c for c in candidates if c.pk == placed.cluster), None),
        borrow=dict(result.borrow),
        lenders=[(POOL if q == POOL else snapshot.names.get(q, str(q)), n) for q, n in result.borrow.items()],
        reclaim=list(result.reclaim),
        expected_start=reservation.start if reservation else None,
        start_reason=start_reason,
        free_in_guarantee=quota.free_in_guarantee if quota else 0,
        guaranteed=quota.guaranteed if quota else 0,
        unit=snapshot.unit,
    )


def preview_admission(
    actor,
    *,
    queue: Queue,
    gpu_model: GpuModel,
    gpus: int | Fraction,
    tier: PriorityTier,
    gang: int = 1,
    user: str = "",
    cluster: Cluster | None = None,
) -> Result:
    """What would happen to this request now (read-only), on `cluster` or where placement would put it."""
    require(actor, Action.VIEW, queue.tenant, _("You may not view tenant %(slug)s.") % {"slug": queue.tenant.slug})
    # The same snapshot and placement a submission decides on, so the preview is what submitting would do.
    request = _request(queue, gpu_model, gpus, tier, gang, user or actor.get_username())
    _snapshot, placed = _place(request, _candidates(queue, [cluster] if cluster else None), tier, lock_sql=None)
    return placed.result


def decide_claim(
    *,
    name: str,
    queue: Queue,
    gpu_model: GpuModel,
    gpus: int | Fraction,
    tier: PriorityTier,
    gang: int = 1,
    user: str = "",
    clusters: list[Cluster] | None = None,
    max_runtime_s: int | None = None,
) -> Admission:
    """Decide a new claim and return it unsaved; the caller saves it in the same transaction.

    `gpus` is the exact share (int or Fraction). `clusters` are where it may run (the first that suits, in
    the order placement ranks them: apps/tenancy/placement.py); None: every cluster the queue is bound to.
    The claim's `cluster` is the one placement picked; with more than one candidate its reason says why.

    Must run inside the caller's transaction: it takes the admission lock, which that transaction
    then holds until it commits, so no other decision sees quota use without this claim.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("decide_claim must run inside the caller's transaction.atomic() block")
    request = _request(queue, gpu_model, gpus, tier, gang, user, max_runtime_s=max_runtime_s, name=name)
    candidates = _candidates(queue, clusters)
    # Everything that does not depend on the decision is built before the lock is taken.
    claim = Admission(
        name=name,
        queue=queue,
        gpu_model=gpu_model,
        gpu_units=request.gpus,
        gang=gang,
        tier=tier,
        user=user,
        max_runtime_s=max_runtime_s,
    )
    lock = ADMISSION_LOCK_SQL if connection.vendor == "postgresql" else None
    snapshot, placed = _place(request, candidates, tier, lock_sql=lock)
    claim.submitted_at = snapshot.now
    result = placed.result
    claim.cluster = next((c for c in candidates if c.pk == placed.cluster), None)
    claim.state = {
        Decision.ADMIT: AdmissionState.ADMITTED,
        Decision.BORROW: AdmissionState.ADMITTED,
        Decision.REJECT: AdmissionState.REJECTED,
    }.get(result.decision, AdmissionState.PENDING)
    claim.decision, claim.reason = result.decision, placed.reason[:500]
    claim.borrowed_from = {str(k): v for k, v in result.borrow.items()}
    claim.reclaim_plan = [list(p) for p in result.reclaim]
    claim.admitted_at = claim.submitted_at if claim.state == AdmissionState.ADMITTED else None
    if claim.admitted_at and max_runtime_s:
        claim.ends_at = claim.admitted_at + timedelta(seconds=max_runtime_s)
    return claim


def submit_admission(**request) -> Admission:
    """Create a claim and decide it at once, in its own transaction (see `decide_claim` for the arguments)."""
    with transaction.atomic():
        return insert_row(decide_claim(**request))


def release_admission(admission: Admission) -> None:
    """The workload ended (or was preempted): give its GPUs back and let pending work in."""
    from apps.tenancy.tasks import admission_pass_task

    updated = Admission.objects.filter(
        pk=admission.pk, state__in=[AdmissionState.ADMITTED, AdmissionState.PENDING]
    ).update(state=AdmissionState.RELEASED, released_at=timezone.now())
    if updated:
        transaction.on_commit(lambda: admission_pass_task.delay())


def run_admission_pass(*, reserve: bool = True) -> dict:
    """Re-order every pending claim and admit what fits, in a constant number of queries.

    Borrowing that a queue's own freed guarantee now covers is handed back to its lenders first.
    Reclaim plans are recorded on the claim; the workloads layer preempts the victims. The head of each
    queue that waits gets a reservation (its expected start, apps/tenancy/reservations.py), written on its
    claim; `reserve=False` keeps strict order instead (the benchmark's comparison).
    """
    from apps.tenancy.snapshot import build_snapshot, pending_claims

    now = timezone.now()
    with transaction.atomic():
        _serialize()
        snapshot, tier_map = build_snapshot()
        before = {pk: dict(h.borrowed_from) for pk, h in snapshot.held.items()}
        for queue, model in {(h.queue, h.model) for h in snapshot.held.values() if h.borrowed_from}:
            rebalance(snapshot, queue, model)
        pending, stored = pending_claims(tier_map)
        results = admission_pass(snapshot, pending, now, reserve=reserve)
        changed, admitted = _write_back(snapshot, results, stored, before, now)
        if admitted:
            record_event(
                None,
                "admission.pass",
                target_type="tenancy.admission",
                target_label=f"{admitted} admitted",
                after={"admitted": admitted, "pending": len(results) - admitted},
            )
    return {"pending": len(results), "admitted": admitted, "updated": changed}


_PASS_FIELDS = [
    "state",
    "decision",
    "reason",
    "borrowed_from",
    "reclaim_plan",
    "admitted_at",
    "ends_at",
    "reserved_units",
    "expected_start",
    "holds_cluster",
]


def _write_back(snapshot: Snapshot, results: list, stored: dict, before: dict, now) -> tuple[int, int]:
    """The pass's outcome onto the claims it changed, in bulk statements; returns (rows written, admitted).

    Only what changed is written: the pass read what each pending claim held (`stored`), so no row is loaded."""
    rows: list[Admission] = []
    admitted = 0
    for request, result in results:
        reason = result.reason[:500]
        plan = [list(p) for p in result.reclaim]
        reservation = result.reservation
        reserved = (
            (reservation.units, reservation.start, reservation.holds_cluster) if reservation else (0, None, False)
        )
        state, admitted_at, ends_at, borrowed = AdmissionState.PENDING, None, None, {}
        if result.admitted:
            state, admitted_at = AdmissionState.ADMITTED, now
            borrowed = {str(k): v for k, v in result.borrow.items()}
            ends_at = now + timedelta(seconds=request.max_runtime_s) if request.max_runtime_s else None
            admitted += 1
        elif result.decision == Decision.REJECT:
            state = AdmissionState.REJECTED
        if state == AdmissionState.PENDING and stored.get(request.id) == (
            result.decision.value,
            reason,
            plan,
            reserved,
        ):
            continue
        units, start, holds = reserved
        rows.append(
            Admission(
                pk=request.id,
                state=state,
                decision=result.decision.value,
                reason=reason,
                borrowed_from=borrowed,
                reclaim_plan=plan,
                admitted_at=admitted_at,
                ends_at=ends_at,
                reserved_units=units,
                expected_start=start,
                holds_cluster=holds,
            )
        )
    bulk_update_fast(Admission, rows, _PASS_FIELDS)
    # Admitted claims whose borrowing moved onto their own queue's freed guarantee (rebalance).
    moved = [
        Admission(pk=pk, borrowed_from={str(k): v for k, v in held.borrowed_from.items()})
        for pk, held in snapshot.held.items()
        if pk in before and before[pk] != held.borrowed_from
    ]
    bulk_update_fast(Admission, moved, ["borrowed_from"])
    return len(rows) + len(moved), admitted
