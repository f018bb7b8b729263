"""Issue 19's quota model on the engine: exact GPU shares, clusters, unguaranteed capacity, reservations, backfill.

The engine counts units of 1/unit GPU; here unit 7 (a 1g MIG slice is one unit) or 1 (whole GPUs). Queues 1 and 2
are under org 10, queue 3 under org 20; clusters 100 (sim-a) and 200 (sim-b).
"""

from datetime import UTC, datetime, timedelta
from fractions import Fraction

from apps.backends.shares import (
    SHARE_UNITS,
    format_share,
    hami_share,
    mig_share,
    replica_share,
    to_units,
    worker_share,
)
from apps.tenancy.admission import (
    POOL,
    UNLIMITED,
    Decision,
    QuotaState,
    Request,
    Snapshot,
    Tier,
    admission_pass,
    admit,
    decide,
    release,
)
from apps.tenancy.placement import place

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
INFERENCE = Tier("online-inference", 1000, preemptible=False, may_borrow=False)
TRAINING = Tier("training", 500)
EXPLORATORY = Tier("exploratory", 100)
A, B = 100, 200


def snapshot(unit: int = 1, bound=None, **quotas) -> Snapshot:
    paths = {1: "/10/11/", 2: "/10/12/", 3: "/20/21/"}
    names = {1: "acme/team-a", 2: "acme/team-b", 3: "lab/rl"}
    states = {}
    for key, (g, b, lend) in quotas.items():
        queue = int(key[1:])
        states[(queue, "h100")] = QuotaState(queue, "h100", g * unit, b * unit if b != UNLIMITED else b, lend)
    return Snapshot(
        quotas=states,
        paths=paths,
        names=names,
        model_names={"h100": "H100"},
        unit=unit,
        bound=bound or {},
        cluster_names={A: "sim-a", B: "sim-b"},
        now=NOW,
    )


def run(snap, queue, gpus, tier=TRAINING, held_id=None, at=NOW, cluster=None, runtime=None):
    request = Request(queue, "h100", gpus, tier, cluster=cluster, max_runtime_s=runtime, id=held_id)
    result = decide(snap, request)
    if result.admitted:
        admit(snap, request, result, held_id or len(snap.held) + 1, at)
    return result


# --- shares ---------------------------------------------------------------------------------------------------


def test_one_definition_of_the_share_per_mode_exact_on_the_grid():
    profiles = [["1g.10gb", 1, 10], ["3g.40gb", 3, 40], ["7g.80gb", 7, 80]]
    assert mig_share(profiles, "1g.10gb") == Fraction(1, 7) and mig_share(profiles, "3g.40gb") == Fraction(3, 7)
    assert hami_share(81920, 20480, 10) == Fraction(1, 4)  # memory wins
    assert hami_share(81920, 8192, 30) == Fraction(3, 10)  # cores win
    assert replica_share(8) == Fraction(1, 8) and replica_share(3) == Fraction(1, 3)
    # Seven 1/7 slices are exactly one GPU of quota, in integers.
    assert 7 * to_units(Fraction(1, 7)) == SHARE_UNITS
    # A share the grid cannot hold exactly is rounded up, never under-counted, by less than one unit.
    assert hami_share(81920, 10000, 1) == Fraction(10000, 81920)  # 125/1024: on the grid
    odd = hami_share(81920, 10001, 1)
    assert Fraction(10001, 81920) < odd < Fraction(10001, 81920) + Fraction(1, SHARE_UNITS)
    assert replica_share(17) > Fraction(1, 17)
    # Time-slicing and MPS share one notion of a replica: 1/replicas of a GPU, for every count MPS allows.
    for n in range(2, 49):
        assert worker_share({"mode": "mps", "replicas": n}, 1, None, None) == replica_share(n)
        assert worker_share({"mode": "time-slice", "replicas": n}, 1, None, None) == replica_share(n)


def test_shares_read_as_fractions():
    assert format_share(Fraction(45, 7)) == "6 3/7"
    assert format_share(Fraction(3, 7)) == "3/7"
    assert format_share(16) == "16"
    assert format_share(to_units(Fraction(45, 7)), SHARE_UNITS) == "6 3/7"
    assert format_share(to_units(Fraction(10000, 81920)), SHARE_UNITS) == "0.122"


def test_a_one_seventh_mig_job_moves_quota_by_one_seventh():
    """Issue 19 item 2: a 1/7 job took a whole GPU of quota ("6 of 16" became "7 of 16")."""
    snap = snapshot(unit=7, q1=(16, 0, None))
    run(snap, 1, 6 * 7)  # six whole GPUs
    result = run(snap, 1, 1)  # one 1g.10gb slice
    assert result.decision == Decision.ADMIT
    assert result.reason == "within guarantee (6 1/7 of 16)"
    assert snap.quotas[(1, "h100")].used == 6 * 7 + 1
    assert snap.show(snap.quotas[(1, "h100")].free_in_guarantee) == "9 6/7"
    # The queue's last 6/7 of a GPU takes six more slices, not a seventh.
    for _ in range(9 * 7 + 6):
        assert run(snap, 1, 1).decision == Decision.ADMIT
    assert run(snap, 1, 1).decision == Decision.QUEUE


# --- clusters ---------------------------------------------------------------------------------------------------


def test_borrowing_only_from_queues_bound_to_the_same_cluster():
    """Issue 19 item 3: a job on sim-a borrowed 13 H100 from a queue bound only to another cluster."""
    snap = snapshot(bound={1: frozenset({A}), 2: frozenset({B}), 3: frozenset({A})}, q1=(0, 32, None), q2=(16, 0, None))
    result = run(snap, 1, 13, cluster=A)
    assert result.decision == Decision.QUEUE
    assert result.reason.endswith("borrowing blocked: no other queue has a guarantee to lend")
    snap = snapshot(
        bound={1: frozenset({A}), 2: frozenset({B}), 3: frozenset({A})},
        q1=(0, 32, None),
        q2=(16, 0, None),
        q3=(8, 0, None),
    )
    result = run(snap, 1, 8, cluster=A)
    assert result.decision == Decision.BORROW and result.borrow == {3: 8}  # not queue 2, though it is nearer
    assert snap.quotas[(2, "h100")].lent == 0


def test_reclaim_prefers_borrowers_on_the_reclaiming_clusters():
    snap = snapshot(bound={1: frozenset({A, B}), 2: frozenset({A, B})}, q1=(16, 0, None), q2=(0, 32, None))
    run(snap, 2, 8, cluster=B, held_id=1, at=NOW - timedelta(hours=1))
    run(snap, 2, 8, cluster=A, held_id=2, at=NOW - timedelta(hours=2))
    result = decide(snap, Request(1, "h100", 16, TRAINING, cluster=A))
    assert result.decision == Decision.RECLAIM and result.reclaim == [(2, 8), (1, 8)]  # sim-a's borrower first
    result = decide(snap, Request(1, "h100", 8, TRAINING, cluster=A))
    assert result.reclaim == [(2, 8)]


def test_capacity_is_per_cluster():
    snap = snapshot(bound={1: frozenset({A, B})}, q1=(16, 0, None))
    snap.free_capacity.update({(A, "h100"): 0, (B, "h100"): 16})
    result = decide(snap, Request(1, "h100", 8, TRAINING, cluster=A))
    assert result.decision == Decision.QUEUE and result.reason.endswith("capacity: only 0 H100 free on sim-a")
    assert decide(snap, Request(1, "h100", 8, TRAINING, cluster=B)).decision == Decision.ADMIT


def test_placement_picks_where_it_fits_now_and_says_why():
    snap = snapshot(bound={1: frozenset({A, B})}, q1=(16, 0, None))
    snap.free_capacity.update({(A, "h100"): 0, (B, "h100"): 16})
    placed = place(snap, Request(1, "h100", 8, TRAINING), [A, B])
    assert placed.cluster == B and placed.result.decision == Decision.ADMIT
    assert placed.reason == (
        "within guarantee (8 of 16); on sim-b (free within guarantee now, per cluster: sim-b 16, sim-a 0)"
    )
    # One candidate (the spec named it): no comparison.
    assert place(snap, Request(1, "h100", 8, TRAINING), [A]).reason.endswith("free on sim-a")


# --- unguaranteed capacity ------------------------------------------------------------------------------------------


def test_gpus_no_queue_guarantees_are_lendable_within_the_borrow_limit():
    """Issue 19 item 5: 91 H100 sat idle while a job waited with "borrowing blocked"."""
    bound = {1: frozenset({A}), 2: frozenset({A}), 3: frozenset({B})}
    snap = snapshot(bound=bound, q1=(0, 16, None), q2=(9, 0, 0), q3=(32, 0, None))
    snap.capacity_total[(A, "h100")] = 100
    snap.free_capacity[(A, "h100")] = 100
    assert snap.unguaranteed(A, "h100") == 91  # queue 3's guarantee is on sim-b: not counted here
    result = run(snap, 1, 16, cluster=A)
    assert result.decision == Decision.BORROW and result.borrow == {POOL: 16}
    assert result.reason == "0 within guarantee + 16 borrowed (16 of it unguaranteed capacity)"
    assert snap.pool_free(A, "h100") == 75
    result = decide(snap, Request(1, "h100", 1, TRAINING, cluster=A))
    assert result.decision == Decision.QUEUE and "borrow limit reached (16 of 16 borrowed)" in result.reason
    # Another cluster's queue cannot use sim-a's pool.
    assert snap.unguaranteed(B, "h100") == 0
    release(snap, 1)
    assert snap.pool_free(A, "h100") == 91


def test_unguaranteed_capacity_is_reclaimed_first_when_a_guarantee_needs_the_gpus():
    bound = {1: frozenset({A}), 2: frozenset({A})}
    snap = snapshot(bound=bound, q1=(16, 0, None), q2=(0, 32, None))
    snap.capacity_total[(A, "h100")] = 40
    snap.free_capacity[(A, "h100")] = 40
    run(snap, 2, 8, cluster=A, held_id=1, at=NOW - timedelta(hours=3))
    run(snap, 2, 8, EXPLORATORY, cluster=A, held_id=2, at=NOW - timedelta(hours=2))
    run(snap, 2, 8, cluster=A, held_id=3, at=NOW - timedelta(hours=1))
    assert all(h.borrowed_from == {POOL: 8} for h in snap.held.values())
    # A node of sim-a fails: 8 GPUs fewer. Queue 1's guarantee of 16 no longer fits the 16 left free.
    snap.free_capacity[(A, "h100")] -= 8
    snap.capacity_total[(A, "h100")] -= 8
    result = decide(snap, Request(1, "h100", 16, TRAINING, cluster=A))
    assert result.decision == Decision.RECLAIM
    assert result.reclaim == [(2, 8)]  # exploratory first, then the newest training job
    assert "reclaiming 8 borrowed from unguaranteed capacity" in result.reason
    result = decide(snap, Request(1, "h100", 16 + 8, TRAINING, cluster=A))
    assert result.decision == Decision.REJECT  # more than its guarantee and it may not borrow


def test_inference_is_never_a_pool_victim():
    bound = {1: frozenset({A}), 2: frozenset({A})}
    snap = snapshot(bound=bound, q1=(16, 0, None), q2=(8, 32, None))
    snap.capacity_total[(A, "h100")] = 32
    snap.free_capacity[(A, "h100")] = 32
    run(snap, 2, 8, INFERENCE, cluster=A, held_id=1)
    snap.held[1].borrowed_from = {POOL: 8}  # as if it had borrowed (it may not: the engine never lets it)
    snap.free_capacity[(A, "h100")] = 0
    result = decide(snap, Request(1, "h100", 8, TRAINING, cluster=A))
    assert result.decision == Decision.QUEUE and "capacity: only 0 H100 free on sim-a" in result.reason


# --- reservations and backfill ----------------------------------------------------------------------------------


def gang_scene():
    """Queue 1 guarantees 32 on sim-a (32 GPUs); three 8-GPU jobs run, ending in 1, 2 and 3 hours."""
    snap = snapshot(bound={1: frozenset({A}), 2: frozenset({A})}, q1=(32, 0, None), q2=(0, 32, None))
    snap.capacity_total[(A, "h100")] = 32
    snap.free_capacity[(A, "h100")] = 32
    for hours in (1, 2, 3):
        run(snap, 1, 8, cluster=A, held_id=hours, at=NOW - timedelta(hours=1), runtime=(hours + 1) * 3600)
    return snap


def test_the_head_that_does_not_fit_gets_a_reservation_with_its_expected_start():
    snap = gang_scene()
    gang = Request(1, "h100", 32, TRAINING, id=10, name="gang", cluster=A, max_runtime_s=3600, submitted_at=NOW)
    ((_request, result),) = admission_pass(snap, [gang], NOW)
    assert result.decision == Decision.QUEUE
    assert result.reservation.start == NOW + timedelta(hours=3)  # when the third running job ends
    assert result.reason.endswith("; reserved from 2026-12-01 15:00 UTC (expected start)")


def test_smaller_work_starts_in_front_only_if_it_ends_before_the_reservation():
    snap = gang_scene()
    submitted = NOW - timedelta(minutes=1)
    gang = Request(1, "h100", 32, TRAINING, id=10, name="gang", cluster=A, max_runtime_s=3600, submitted_at=submitted)
    long = Request(1, "h100", 8, TRAINING, id=12, name="long", cluster=A, max_runtime_s=4 * 3600, submitted_at=NOW)
    later = NOW + timedelta(seconds=1)
    short = Request(1, "h100", 8, TRAINING, id=11, name="short", cluster=A, max_runtime_s=2 * 3600, submitted_at=later)
    results = dict((r.id, res) for r, res in admission_pass(snap, [gang, long, short], NOW))
    assert results[11].decision == Decision.ADMIT
    assert results[11].reason.endswith("; ends before gang's reserved start")
    assert results[12].decision == Decision.QUEUE
    assert results[12].reason == "waiting behind gang, which holds a reservation from 2026-12-01 15:00 UTC"


def test_other_queues_borrowing_on_the_cluster_respect_the_reservation():
    snap = gang_scene()
    gang = Request(1, "h100", 32, TRAINING, id=10, name="gang", cluster=A, max_runtime_s=3600, submitted_at=NOW)
    admission_pass(snap, [gang], NOW)
    # Queue 2 would borrow queue 1's free 8 (queue 1 lends nothing while its head holds a reservation) ...
    result = decide(snap, Request(2, "h100", 8, TRAINING, cluster=A, max_runtime_s=5 * 3600))
    assert result.decision == Decision.QUEUE and "borrowing blocked" in result.reason


def test_without_a_runtime_limit_the_start_is_unknown_and_order_is_strict():
    snap = snapshot(bound={1: frozenset({A})}, q1=(17, 0, None))
    run(snap, 1, 16, cluster=A, held_id=1, runtime=None)  # a service: runs until cancelled
    gang = Request(1, "h100", 8, TRAINING, id=10, name="gang", cluster=A, max_runtime_s=3600, submitted_at=NOW)
    tiny = Request(1, "h100", 1, TRAINING, id=11, name="tiny", cluster=A, max_runtime_s=60, submitted_at=NOW)
    results = dict((r.id, res) for r, res in admission_pass(snap, [gang, tiny], NOW))
    assert results[10].reservation.start is None
    assert "start not known (it waits for work without a runtime limit)" in results[10].reason
    assert results[11].reason == "waiting behind earlier work in this queue"
