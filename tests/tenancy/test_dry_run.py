"""The submit page's admission preview is a dry run of the real decision: over generated fleets in the database,
`dry_run_claim` answers what `decide_claim` (the code a submission runs) decides, and the expected start it shows
for a claim that would head its queue is the one the next admission pass writes on the claim.

Fleets are built like tests/tenancy/test_quota_properties.py's (1-2 clusters, queues bound to one or both, with
guarantees that fit each cluster), here as rows: tenants in two organizations, clusters with nodes, queues, quota
rows; then a stream of claims decided and stored by `submit_admission` and settled by admission passes, so that
queues use, lend, borrow, hold reservations and wait. Each example runs in a savepoint rolled back afterwards.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from apps.accounts.models import Tenant
from apps.fleet.models import Cluster, GpuModel, Node, NodeState
from apps.tenancy.models import Admission, AdmissionState, PriorityTier, Queue, QueueBinding, Quota
from apps.tenancy.services.admissions import decide_claim, dry_run_claim, run_admission_pass, submit_admission
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db

TIERS = ["online-inference", "training", "exploratory"]


@st.composite
def fleets(draw):
    clusters = draw(st.integers(1, 2))
    queues = draw(st.integers(2, 4))
    bound = {q: sorted(draw(st.sets(st.integers(0, clusters - 1), min_size=1))) for q in range(queues)}
    guarantees = {q: draw(st.integers(0, 12)) for q in bound}
    guarantees[0] = max(guarantees[0], 4)  # the request's queue usually has some
    borrow = {q: draw(st.one_of(st.none(), st.integers(0, 16))) for q in bound}
    lend = {q: draw(st.one_of(st.none(), st.integers(0, guarantees[q]))) for q in bound}
    # Nodes of 8 GPUs, enough for the guarantees bound to the cluster plus some unguaranteed capacity.
    nodes = {
        c: -(-sum(guarantees[q] for q in bound if c in bound[q]) // 8) + draw(st.integers(0, 2))
        for c in range(clusters)
    }
    busy = {c: draw(st.integers(0, 4)) for c in range(clusters)}  # GPUs in use outside the console's claims
    stream = draw(
        st.lists(
            st.tuples(
                st.integers(0, queues - 1),
                st.integers(1, 12),
                st.sampled_from(TIERS),
                st.sampled_from([None, 600, 3600, 3600, 7200]),
            ),
            max_size=10,
        )
    )
    request = (
        draw(st.sampled_from([0, 0, *range(queues)])),
        draw(st.one_of(st.integers(1, 16), st.just(Fraction(3, 7)))),
        draw(st.sampled_from(TIERS)),
        draw(st.one_of(st.none(), st.sampled_from([600, 3600]))),
        draw(st.booleans()),  # name one cluster
    )
    return bound, guarantees, borrow, lend, nodes, busy, stream, request


def _build(fleet, h100):
    bound, guarantees, borrow, lend, nodes, busy, _stream, _request = fleet
    orgs = []
    for i in range(2):
        org = Tenant.objects.create(name=f"Org {i}", slug=f"dry-org-{i}")
        org.path = f"/{org.pk}/"
        org.save(update_fields=["path"])
        orgs.append(org)
    clusters = [Cluster.objects.create(name=f"dry-c{c}", kind="simulator") for c in nodes]
    for c, count in nodes.items():
        left = busy[c]
        for n in range(count):
            used = min(left, 8)
            left -= used
            Node.objects.create(
                cluster=clusters[c],
                name=f"n{n}",
                gpu_model=h100,
                state=NodeState.READY,
                gpu_count=8,
                gpu_allocatable=8,
                gpu_allocated=used,
            )
    queues = []
    for q in bound:
        team = Tenant.objects.create(name=f"Team {q}", slug=f"dry-team-{q}", parent=orgs[q % 2])
        team.path = f"{orgs[q % 2].path}{team.pk}/"
        team.save(update_fields=["path"])
        queue = Queue.objects.create(tenant=team, name="train")
        for c in bound[q]:
            QueueBinding.objects.create(queue=queue, cluster=clusters[c])
        Quota.objects.create(
            queue=queue, gpu_model=h100, guaranteed=guarantees[q], borrow_limit=borrow[q], lend_limit=lend[q]
        )
        queues.append(queue)
    return queues, clusters


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(fleet=fleets())
# Always among the examples: a queue whose guarantee is in use by a job of an hour, asked for as much again: it
# waits at the head of its queue with an expected start when that job ends; and the same wanting to borrow from a
# lender whose guarantee is in use by a job of two hours.
@example(
    fleet=(
        {0: [0], 1: [0]},
        {0: 8, 1: 0},
        {0: None, 1: None},
        {0: None, 1: None},
        {0: 1},
        {0: 0},
        [(0, 8, "training", 3600)],
        (0, 8, "training", 3600, False),
    )
)
@example(
    fleet=(
        {0: [0], 1: [0]},
        {0: 8, 1: 8},
        {0: None, 1: None},
        {0: None, 1: None},
        {0: 2},
        {0: 0},
        [(0, 8, "training", 3600), (1, 8, "training", 7200)],
        (0, 12, "training", None, True),
    )
)
def test_the_dry_run_decides_what_the_submission_decides(personas, fleet):
    admin = fresh(personas.platform_admin)
    h100 = GpuModel.objects.get(code="h100")
    tiers = {t.name: t for t in PriorityTier.objects.filter(name__in=TIERS)}
    with transaction.atomic():
        queues, _clusters = _build(fleet, h100)
        *_, stream, (q, gpus, tier, runtime, name_one) = fleet
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
        waiting_before = Admission.objects.filter(state=AdmissionState.PENDING).exists()

        queue = Queue.objects.select_related("tenant").get(pk=queues[q].pk)
        bound = list(Cluster.objects.filter(queue_bindings__queue=queue).order_by("name"))
        candidates = bound[-1:] if name_one else None
        args = dict(
            queue=queue,
            gpu_model=h100,
            gpus=gpus,
            tier=tiers[tier],
            user="member",
            clusters=candidates,
            max_runtime_s=runtime,
        )
        dry = dry_run_claim(admin, **args, name="workload:new/job")
        with transaction.atomic():
            claim = decide_claim(**args, name="workload:new/job")
            assert (dry.decision.value, dry.reason) == (claim.decision, claim.reason)
            assert dry.cluster == claim.cluster
            assert {str(k): v for k, v in dry.borrow.items()} == claim.borrowed_from
            assert [list(p) for p in dry.reclaim] == claim.reclaim_plan
            if not waiting_before and claim.state == AdmissionState.PENDING:
                # It would head its queue: the pass gives it the expected start the preview showed.
                claim.save()
                run_admission_pass()
                claim.refresh_from_db()
                assert claim.expected_start == dry.expected_start
                if claim.state == AdmissionState.PENDING:
                    assert claim.reason == dry.start_reason
            transaction.set_rollback(True)
        transaction.set_rollback(True)


def test_the_dry_run_needs_the_right_to_view_the_queue(personas):
    """A dry run shows another tenant's use: it needs the right to view the queue's tenant."""
    from apps.core.errors import Forbidden

    h100 = GpuModel.objects.get(code="h100")
    queue = Queue.objects.create(tenant=personas.b, name="train")
    tier = PriorityTier.objects.get(name="training")
    with pytest.raises(Forbidden):
        dry_run_claim(fresh(personas.member_a), queue=queue, gpu_model=h100, gpus=8, tier=tier)
    with pytest.raises(Forbidden):
        dry_run_claim(AnonymousUser(), queue=queue, gpu_model=h100, gpus=8, tier=tier)
    assert dry_run_claim(fresh(personas.member_b), queue=queue, gpu_model=h100, gpus=8, tier=tier).decision == "reject"
