"""The SQL guard of a submission within its guarantee (apps/tenancy/within_guarantee.py) against the engine.

Over generated fleets in the database (those of tests/tenancy/test_dry_run.py: queues in two organizations on one
or two clusters, guarantees, borrow and lend limits, a stream of claims decided and settled by admission passes, so
that queues use, lend, borrow, wait and hold reservations), with per-user caps and shares that read as decimals
added: where the guard finds a row, `decide_claim` (the engine, what a submission ran before) admits the claim
within the guarantee with the same reason; where the engine admits within the guarantee, the guard finds it too,
except in the cases it leaves to the engine by design (pending work of the tier or above in the queue, another
queue's reservation holding the cluster, a used share that reads as a decimal), where it must refuse.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from django.db import connection, transaction
from django.db.models import Sum
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from apps.backends.shares import SHARE_UNITS, to_units
from apps.fleet.models import Cluster, GpuModel
from apps.tenancy.models import Admission, AdmissionState, PriorityTier, Queue, Quota
from apps.tenancy.services.admissions import decide_claim, run_admission_pass, submit_admission
from apps.tenancy.within_guarantee import within_guarantee
from tests.tenancy.test_dry_run import TIERS, _build, fleets

pytestmark = pytest.mark.django_db


@st.composite
def cases(draw):
    fleet = draw(fleets())
    queues = len(fleet[0])
    per_user = {q: draw(st.one_of(st.none(), st.none(), st.integers(1, 12))) for q in range(queues)}
    user = draw(st.sampled_from(["someone", "member", ""]))
    # A share whose use reads as a decimal ("0.005"), in some examples: the guard leaves those to the engine.
    share = draw(st.one_of(st.none(), st.none(), st.none(), st.just(Fraction(5, 1024))))
    return fleet, per_user, user, share


def _guard(attempt) -> str | None:
    """The guard's reason (it would admit), or None (it refuses), read without writing anything."""
    if attempt is None:
        return None
    with connection.cursor() as cursor:
        cursor.execute(attempt.guard.sql, attempt.guard.params)
        row = cursor.fetchone()
    return row[0] if row else None


def _left_to_the_engine(queue, cluster, h100, tier, units) -> bool:
    """The cases the guard refuses by design, whatever the engine decides (see apps/tenancy/within_guarantee.py)."""
    claims = Admission.objects.filter(gpu_model=h100)
    waiting = claims.filter(state=AdmissionState.PENDING, queue=queue, tier__value__gte=tier.value).exists()
    held = (
        claims.filter(state=AdmissionState.PENDING, expected_start__isnull=False, holds_cluster=True, cluster=cluster)
        .exclude(queue=queue)
        .exists()
    )
    used = claims.filter(state=AdmissionState.ADMITTED, queue=queue).aggregate(n=Sum("gpu_units"))["n"] or 0
    guaranteed = Quota.objects.filter(queue=queue, gpu_model=h100).values_list("guaranteed", flat=True).first() or 0
    shown = Fraction(min(used, guaranteed * SHARE_UNITS) + units, SHARE_UNITS)
    return waiting or held or shown.denominator > 100


def _case(guarantees, stream, request, cap=None, user="member"):
    """One cluster of two nodes, two queues on it: queue 0's per-user cap `cap`."""
    none = {0: None, 1: None}
    return ({0: [0], 1: [0]}, guarantees, none, none, {0: 2}, {0: 0}, stream, request), {0: cap, 1: None}, user, None


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(case=cases())
# Within the guarantee; past it with a lender (the engine borrows); the guarantee lent out (the engine reclaims);
# a per-user cap reached (the engine waits); work of the tier waiting in the queue (left to the engine).
@example(case=_case({0: 8, 1: 0}, [(0, 4, "training", 3600)], (0, 4, "training", 3600, False)))
@example(case=_case({0: 8, 1: 8}, [(0, 8, "training", 3600)], (0, 4, "training", None, False)))
@example(case=_case({0: 8, 1: 0}, [(1, 6, "exploratory", 3600)], (0, 4, "training", None, False)))
@example(case=_case({0: 8, 1: 0}, [(0, 3, "training", 3600)], (0, 2, "training", None, False), cap=4, user="someone"))
@example(case=_case({0: 8, 1: 0}, [(0, 8, "training", 3600), (0, 4, "training", 900)], (0, 1, "training", None, 0)))
def test_the_guard_admits_what_the_engine_admits_within_the_guarantee(personas, case):
    fleet, per_user, user, share = case
    h100 = GpuModel.objects.get(code="h100")
    tiers = {t.name: t for t in PriorityTier.objects.filter(name__in=TIERS)}
    with transaction.atomic():
        queues, _clusters = _build(fleet, h100)
        for q, cap in per_user.items():
            Quota.objects.filter(queue=queues[q]).update(per_user_limit=cap)
        *_, stream, (q, gpus, tier, runtime, _name_one) = fleet
        for i, (sq, sgpus, stier, sruntime) in enumerate(stream):
            submit_admission(
                name=f"workload:s/{i}",
                queue=queues[sq],
                gpu_model=h100,
                gpus=sgpus,
                tier=tiers[stier],
                user="someone",
                max_runtime_s=sruntime,
            )
            if i % 3 == 2:
                run_admission_pass()
        run_admission_pass()

        queue = Queue.objects.select_related("tenant").get(pk=queues[q].pk)
        cluster = Cluster.objects.filter(queue_bindings__queue=queue).order_by("name").last()  # its one candidate
        gpus = share if share is not None else gpus
        args = dict(
            queue=queue, gpu_model=h100, gpus=gpus, tier=tiers[tier], user=user, max_runtime_s=runtime, name="w:n/j"
        )
        guard = _guard(within_guarantee(**args, cluster=cluster))
        left = _left_to_the_engine(queue, cluster, h100, tiers[tier], to_units(gpus))
        with transaction.atomic():
            claim = decide_claim(**args, clusters=[cluster])
            transaction.set_rollback(True)
        event(f"guard {'admits' if guard else 'refuses'}; engine: {claim.decision}{'; left to it' if left else ''}")
        if guard is not None:  # what the guard admits, the engine admits, in the same words
            assert (claim.decision, claim.reason, claim.cluster) == ("admit", guard, cluster)
        elif left:  # the guard refuses these by design, whatever the engine decides
            pass
        else:  # and what the engine admits within the guarantee, the guard admits
            assert claim.decision != "admit", claim.reason
        if left:
            assert guard is None
        transaction.set_rollback(True)


def test_the_guard_refuses_work_the_engine_must_decide(personas):
    """No GPUs asked, or the cluster short of free GPUs by the cached figure: no guard, the engine decides."""
    h100 = GpuModel.objects.get(code="h100")
    tier = PriorityTier.objects.get(name="training")
    queue = Queue.objects.create(tenant=personas.a, name="wg")
    cluster = Cluster.objects.create(name="wg-c", kind="simulator")
    Quota.objects.create(queue=queue, gpu_model=h100, guaranteed=8)
    args = dict(queue=queue, gpu_model=h100, tier=tier, user="u", cluster=cluster, name="w:a/j")
    assert within_guarantee(**args, gpus=0) is None
    assert _guard(within_guarantee(**args, gpus=8)) == "within guarantee (8 of 8)"  # no nodes: capacity unknown
    assert _guard(within_guarantee(**args, gpus=9)) is None
    from apps.fleet.models import Node, NodeState

    Node.objects.create(
        cluster=cluster, name="n0", gpu_model=h100, state=NodeState.READY, gpu_count=8, gpu_allocatable=8,
        gpu_allocated=5,
    )  # fmt: skip
    assert within_guarantee(**args, gpus=4) is None  # 3 free on the cluster: the engine reclaims or waits
    assert _guard(within_guarantee(**args, gpus=Fraction(3, 7))) == "within guarantee (3/7 of 8)"
