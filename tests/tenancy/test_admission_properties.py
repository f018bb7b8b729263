"""Property tests (hypothesis) of the admission engine's invariants, over random quotas and request streams.

* never admit beyond guarantee + borrow limit;
* never lend beyond the lend limit, and a queue's own use plus what it lent never exceeds its guarantee;
* what queues lent equals what borrowers hold from them;
* online-inference (non-preemptible) is never a reclaim or what-if victim;
* after a reclaim plan is carried out, the reclaiming queue can use the guarantee it asked for.
"""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.tenancy.admission import (
    UNLIMITED,
    Decision,
    QuotaState,
    Request,
    Snapshot,
    Tier,
    admit,
    decide,
    preview_quota_change,
    release,
)

TIERS = [
    Tier("online-inference", 1000, False, False),
    Tier("periodic", 800),
    Tier("training", 500),
    Tier("exploratory", 100),
]
NOW = datetime(2026, 11, 29, tzinfo=UTC)

quota_rows = st.lists(
    st.tuples(st.integers(0, 32), st.one_of(st.none(), st.integers(0, 32)), st.one_of(st.none(), st.integers(0, 32))),
    min_size=2,
    max_size=6,
)
actions = st.lists(
    st.tuples(
        st.sampled_from(["submit", "submit", "submit", "release"]),
        st.integers(0, 5),
        st.integers(1, 24),
        st.integers(0, 3),
    ),
    max_size=60,
)


def build(rows) -> Snapshot:
    quotas, paths, names = {}, {}, {}
    for queue, (g, borrow, lend) in enumerate(rows):
        quotas[(queue, "h100")] = QuotaState(
            queue, "h100", g, UNLIMITED if borrow is None else borrow, None if lend is None else min(lend, g)
        )
        paths[queue] = f"/{queue % 2}/{queue}/"
        names[queue] = f"q{queue}"
    return Snapshot(quotas=quotas, paths=paths, names=names, model_names={"h100": "H100"})


def check_invariants(snap: Snapshot) -> None:
    lent_by_holders: dict[int, int] = {}
    for held in snap.held.values():
        for lender, n in held.borrowed_from.items():
            lent_by_holders[lender] = lent_by_holders.get(lender, 0) + n
    for (queue, _), q in snap.quotas.items():
        assert q.used <= q.guaranteed + q.borrow_limit, "admitted beyond guarantee + borrow limit"
        cap = q.guaranteed if q.lend_limit is None else q.lend_limit
        assert q.lent <= cap, "lent beyond the lend limit"
        assert q.own_used + q.lent <= q.guaranteed, "own use plus lent exceeds the guarantee"
        assert q.lent == lent_by_holders.get(queue, 0), "lent does not match what borrowers hold"
        assert q.used == sum(h.gpus for h in snap.held.values() if h.queue == queue)
        assert q.borrowed == sum(sum(h.borrowed_from.values()) for h in snap.held.values() if h.queue == queue)


@settings(max_examples=300, deadline=None)
@given(quota_rows, actions)
def test_invariants_hold_under_any_stream(rows, stream):
    snap = build(rows)
    next_id = 1
    for kind, queue, gpus, tier_index in stream:
        queue %= len(rows)
        if kind == "release" and snap.held:
            release(snap, sorted(snap.held)[queue % len(snap.held)])
        else:
            tier = TIERS[tier_index]
            request = Request(queue, "h100", gpus, tier)
            result = decide(snap, request)
            if result.admitted:
                admit(snap, request, result, next_id, NOW + timedelta(seconds=next_id))
                next_id += 1
            elif result.decision == Decision.RECLAIM:
                for victim, _ in result.reclaim:
                    assert snap.held[victim].tier.preemptible, "a non-preemptible victim"
                for victim, _ in result.reclaim:
                    release(snap, victim)
                after = decide(snap, request)
                assert after.decision in {Decision.ADMIT, Decision.BORROW, Decision.QUEUE}
                assert snap.quotas[(queue, "h100")].free_in_guarantee >= min(
                    gpus, snap.quotas[(queue, "h100")].guaranteed - snap.quotas[(queue, "h100")].own_used
                ), "reclaim did not free it"
                if after.admitted:
                    admit(snap, request, after, next_id, NOW + timedelta(seconds=next_id))
                    next_id += 1
            if not tier.may_borrow and result.admitted:
                assert not result.borrow, "online-inference borrowed"
        check_invariants(snap)


@settings(max_examples=200, deadline=None)
@given(quota_rows, actions, st.integers(0, 5), st.integers(0, 32), st.integers(0, 8))
def test_what_if_never_picks_inference(rows, stream, queue, new_guarantee, new_borrow):
    snap = build(rows)
    for i, (_, q, gpus, tier_index) in enumerate(stream):
        request = Request(q % len(rows), "h100", gpus, TIERS[tier_index])
        result = decide(snap, request)
        if result.admitted:
            admit(snap, request, result, i + 1, NOW + timedelta(seconds=i))
    impact = preview_quota_change(snap, queue % len(rows), "h100", guaranteed=new_guarantee, borrow_limit=new_borrow)
    for held_id, gpus in impact.preempt:
        assert snap.held[held_id].tier.preemptible
        assert snap.held[held_id].gpus == gpus
    assert len({h for h, _ in impact.preempt}) == len(impact.preempt), "a victim listed twice"
