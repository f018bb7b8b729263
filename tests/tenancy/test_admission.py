"""The admission engine: decisions with reasons, borrowing from the nearest lenders, reclaim, what-if."""

from datetime import UTC, datetime, timedelta

from apps.tenancy.admission import (
    Decision,
    Held,
    QuotaState,
    Request,
    Snapshot,
    Tier,
    admission_pass,
    admit,
    decide,
    plan_reclaim,
    preview_quota_change,
    release,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
INFERENCE = Tier("online-inference", 1000, preemptible=False, may_borrow=False)
PERIODIC = Tier("periodic", 800)
TRAINING = Tier("training", 500)
EXPLORATORY = Tier("exploratory", 100)


def snapshot(**quotas) -> Snapshot:
    """Queues 1 (team-a) and 2 (team-b) under org 10; queue 3 (lab) under org 20."""
    paths = {1: "/10/11/", 2: "/10/12/", 3: "/20/21/"}
    names = {1: "acme/team-a", 2: "acme/team-b", 3: "lab/rl"}
    states = {}
    for key, (g, b, lend) in quotas.items():
        queue = int(key[1:])
        states[(queue, "h100")] = QuotaState(queue, "h100", g, b, lend)
    return Snapshot(quotas=states, paths=paths, names=names, model_names={"h100": "H100"})


def run(snap, queue, gpus, tier=TRAINING, held_id=None, at=NOW):
    request = Request(queue, "h100", gpus, tier)
    result = decide(snap, request)
    if result.admitted:
        admit(snap, request, result, held_id or len(snap.held) + 1, at)
    return result


def test_admit_within_guarantee():
    snap = snapshot(q1=(16, 8, None), q2=(16, 0, None))
    result = run(snap, 1, 8)
    assert result.decision == Decision.ADMIT and result.reason == "within guarantee (8 of 16)"


def test_borrow_from_nearest_lender_first():
    snap = snapshot(q1=(8, 16, None), q2=(8, 0, None), q3=(8, 0, None))
    result = run(snap, 1, 12)
    assert result.decision == Decision.BORROW and result.borrow == {2: 4}  # the sibling, not the other org
    assert result.reason == "8 within guarantee + 4 borrowed"
    result = run(snap, 1, 8)
    assert result.borrow == {2: 4, 3: 4}


def test_queue_reasons():
    snap = snapshot(q1=(8, 8, None), q2=(8, 0, 0))
    result = decide(snap, Request(1, "h100", 16, TRAINING))
    assert result.decision == Decision.QUEUE
    assert result.reason == "needs 16 × H100; 8 free within guarantee; borrowing blocked: lenders at their lend limit"
    run(snap, 1, 8)
    assert decide(snap, Request(1, "h100", 1, INFERENCE)).reason.endswith("tier online-inference never borrows")


def test_borrow_limit_and_reject_reasons():
    snap = snapshot(q1=(8, 4, None), q2=(16, 0, None))
    assert run(snap, 1, 12).decision == Decision.BORROW
    result = decide(snap, Request(1, "h100", 1, TRAINING))
    assert result.decision == Decision.QUEUE and "borrow limit reached (4 of 4 borrowed)" in result.reason
    result = decide(snap, Request(1, "h100", 13, TRAINING))
    assert result.decision == Decision.REJECT
    assert result.reason == (
        "needs 13 × H100, more than it can ever get: the queue holds at most 8 guaranteed + 4 borrowed"
    )
    assert decide(snap, Request(1, "a100", 1, TRAINING)).reason == "GPU model a100 is not in queue acme/team-a's quota"
    result = decide(snap, Request(1, "h100", 9, INFERENCE))
    assert result.decision == Decision.REJECT and "never borrows and the guarantee is 8" in result.reason


def test_capacity_reason():
    snap = snapshot(q1=(16, 0, None))
    snap.free_capacity[(None, "h100")] = 4
    result = decide(snap, Request(1, "h100", 8, TRAINING))
    assert result.decision == Decision.QUEUE and result.reason.endswith("capacity: only 4 H100 free in the fleet")


def test_reclaim_takes_lowest_tier_then_newest_never_inference():
    snap = snapshot(q1=(16, 0, None), q2=(0, 32, None))
    run(snap, 2, 4, TRAINING, held_id=1, at=NOW - timedelta(hours=2))
    run(snap, 2, 4, EXPLORATORY, held_id=2, at=NOW - timedelta(hours=3))
    run(snap, 2, 4, TRAINING, held_id=3, at=NOW - timedelta(hours=1))
    assert snap.quotas[(1, "h100")].lent == 12
    result = decide(snap, Request(1, "h100", 12, TRAINING))
    assert result.decision == Decision.RECLAIM
    assert result.reclaim == [(2, 4), (3, 4)]  # exploratory first, then the newest training job
    for held_id, _ in result.reclaim:
        release(snap, held_id)
    assert decide(snap, Request(1, "h100", 12, TRAINING)).decision == Decision.ADMIT


def test_lent_guarantee_comes_back_before_borrowing():
    snap = snapshot(q1=(8, 8, None), q2=(8, 16, None), q3=(8, 0, None))
    run(snap, 2, 12)  # borrows 4 from q1 (its sibling)
    assert snap.quotas[(1, "h100")].lent == 4
    result = decide(snap, Request(1, "h100", 12, TRAINING))
    assert result.decision == Decision.RECLAIM and result.reclaim == [(1, 12)]


def test_admission_pass_orders_by_tier_then_fair_share_then_age():
    snap = snapshot(q1=(4, 8, None), q2=(4, 8, None), q3=(8, 0, None))
    run(snap, 1, 8)  # q1 already borrows 4: its share is higher than q2's
    pending = [
        Request(1, "h100", 2, TRAINING, id=101, submitted_at=NOW - timedelta(hours=3)),
        Request(2, "h100", 2, TRAINING, id=102, submitted_at=NOW - timedelta(hours=1)),
        Request(2, "h100", 2, EXPLORATORY, id=103, submitted_at=NOW - timedelta(hours=5)),
        Request(3, "h100", 2, PERIODIC, id=104, submitted_at=NOW),
    ]
    order = [request.id for request, _ in admission_pass(snap, pending, NOW)]
    assert order == [104, 102, 101, 103]


def test_preview_quota_change_reports_preemptions_and_lost_borrowing():
    snap = snapshot(q1=(16, 0, None), q2=(0, 16, None))
    run(snap, 1, 8, TRAINING, held_id=1)
    run(snap, 2, 4, TRAINING, held_id=2, at=NOW - timedelta(hours=1))
    run(snap, 2, 4, EXPLORATORY, held_id=3)
    impact = preview_quota_change(snap, 1, "h100", guaranteed=8, borrow_limit=0)
    assert impact.preempt == [(3, 4), (2, 4)] and impact.lose_borrowed == {2: 8}
    impact = preview_quota_change(snap, 1, "h100", guaranteed=12, borrow_limit=0)
    assert impact.preempt == [(3, 4)] and impact.lose_borrowed == {2: 4}
    assert not preview_quota_change(snap, 1, "h100", guaranteed=32).disruptive


def test_preview_never_preempts_inference():
    snap = snapshot(q1=(8, 0, None))
    run(snap, 1, 8, INFERENCE, held_id=1)
    impact = preview_quota_change(snap, 1, "h100", guaranteed=4, borrow_limit=0)
    assert impact.preempt == [] and "non-preemptible" in impact.notes[0]


def test_plan_reclaim_only_takes_borrowers_of_that_lender():
    snap = snapshot(q1=(8, 0, None), q2=(0, 16, None), q3=(8, 0, None))
    snap.held[1] = Held(1, 2, "h100", 4, TRAINING, NOW, borrowed_from={3: 4})
    plan, freed = plan_reclaim(snap, 1, "h100", 4)
    assert plan == [] and freed == 0
