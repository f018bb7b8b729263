"""Build the admission engine's Snapshot from the database in a fixed number of queries."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Sum

from apps.fleet.models import Node, NodeState
from apps.tenancy.admission import UNLIMITED, Held, QuotaState, Request, Snapshot, Tier
from apps.tenancy.models import Admission, AdmissionState, PriorityTier, Quota


def tiers() -> dict[int, Tier]:
    return {t.pk: Tier(t.name, t.value, t.preemptible, t.may_borrow) for t in PriorityTier.objects.all()}


def build_snapshot(with_capacity: bool = True, model: str | None = None) -> tuple[Snapshot, dict[int, Tier]]:
    """Every quota row, every admitted claim, and the fleet's free GPUs per model: 4-5 queries in all.

    With `model` (a GPU model code) only that model's rows are loaded: enough to decide one request.
    """
    tier_map = tiers()
    quotas: dict[tuple[int, str], QuotaState] = {}
    paths: dict[int, str] = {}
    names: dict[int, str] = {}
    models: dict[str, str] = {}
    quota_rows = Quota.objects.filter(gpu_model__code=model) if model else Quota.objects.all()
    rows = quota_rows.values_list(
        "queue_id",
        "gpu_model__code",
        "gpu_model__name",
        "guaranteed",
        "borrow_limit",
        "lend_limit",
        "weight",
        "per_user_limit",
        "queue__tenant__path",
        "queue__tenant__slug",
        "queue__name",
    )
    for queue, code, model_name, g, borrow, lend, weight, per_user, path, slug, qname in rows:
        quotas[(queue, code)] = QuotaState(
            queue,
            code,
            g,
            UNLIMITED if borrow is None else borrow,
            lend,
            weight,
            UNLIMITED if per_user is None else per_user,
        )
        paths[queue] = path
        names[queue] = f"{slug}/{qname}"
        models[code] = model_name
    snapshot = Snapshot(quotas=quotas, paths=paths, names=names, model_names=models)
    admitted = Admission.objects.filter(state=AdmissionState.ADMITTED)
    if model:
        admitted = admitted.filter(gpu_model__code=model)
    for pk, queue, code, gpus, tier_id, user, borrowed, admitted_at in admitted.values_list(
        "id", "queue_id", "gpu_model__code", "gpus", "tier_id", "user", "borrowed_from", "admitted_at"
    ):
        lenders = {int(k): int(v) for k, v in (borrowed or {}).items()}
        snapshot.held[pk] = Held(pk, queue, code, gpus, tier_map[tier_id], admitted_at, user, lenders)
        quota = quotas.get((queue, code))
        if quota is not None:
            quota.used += gpus
        for lender, n in lenders.items():
            if (lender, code) in quotas:
                quotas[(lender, code)].lent += n
        snapshot.user_used[(queue, code, user)] += gpus
    if with_capacity:
        snapshot.free_capacity.update(free_capacity())
    return snapshot, tier_map


def free_capacity() -> dict[str, float]:
    """Free GPUs per model code on ready, uncordoned nodes, less what admitted work holds but has not placed."""
    free: dict[str, float] = defaultdict(float)
    for code, allocatable, allocated in (
        Node.objects.filter(state=NodeState.READY, unschedulable=False, gpu_model__isnull=False)
        .values("gpu_model__code")
        .annotate(a=Sum("gpu_allocatable"), b=Sum("gpu_allocated"))
        .values_list("gpu_model__code", "a", "b")
    ):
        free[code] = max((allocatable or 0) - (allocated or 0), 0)
    return dict(free)


def pending_requests(tier_map: dict[int, Tier]) -> list[Request]:
    """Every pending claim as an engine Request, in one query."""
    return [
        Request(queue, code, gpus, tier_map[tier_id], gang, user, pk, submitted)
        for pk, queue, code, gpus, gang, tier_id, user, submitted in Admission.objects.filter(
            state=AdmissionState.PENDING
        ).values_list("id", "queue_id", "gpu_model__code", "gpus", "gang", "tier_id", "user", "submitted_at")
    ]


def quota_usage(snapshot: Snapshot) -> dict[tuple[int, str], dict]:
    """Per (queue, model): guaranteed, used, borrowed, lent, for the pages and API."""
    return {
        key: {
            "guaranteed": q.guaranteed,
            "used": q.used,
            "borrowed": q.borrowed,
            "lent": q.lent,
            "free": q.free_in_guarantee,
        }
        for key, q in snapshot.quotas.items()
    }
