"""Property tests (hypothesis) of issue 19's quota model over random fleets, queues and workload streams.

The engine (apps/tenancy/admission.py) runs as the console runs it: a pass over everything pending at each event
of a small discrete-event simulation (work arrives; work ends at its runtime limit, as the backends enforce it),
with reclaim plans carried out at once. Shares are units of 1/7 GPU (a 1g MIG slice is 1). Over any fleet whose
clusters' guarantees fit their GPUs:

* no queue ever holds more than its guarantee + borrow limit;
* the shares on a cluster never add up to more than its GPUs;
* online inference is never a reclaim victim;
* guarantees are honoured: work within its queue's free guarantee on one of its clusters is admitted, at once or
  once the reclaim it asks for is carried out;
* a head of line within its guarantee that gets a reservation starts no later than the reservation's start, when
  nothing of a higher tier arrives.
"""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.tenancy.admission import (
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

UNIT = 7
T0 = datetime(2026, 12, 1, tzinfo=UTC)
INFERENCE = Tier("online-inference", 1000, preemptible=False, may_borrow=False)
TRAINING = Tier("training", 500)
EXPLORATORY = Tier("exploratory", 100)
STRICT = Tier("training-within-guarantee", 500, preemptible=True, may_borrow=False)
TIERS = [INFERENCE, TRAINING, EXPLORATORY]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def fleets(draw):
    """1-2 clusters; 2-5 queues, each bound to one or both clusters, with guarantees that fit every cluster."""
    clusters = draw(st.integers(1, 2))
    queues = draw(st.integers(2, 5))
    bound = {q: frozenset(draw(st.sets(st.integers(0, clusters - 1), min_size=1))) for q in range(1, queues + 1)}
    guarantees = {q: draw(st.integers(0, 16)) for q in bound}
    borrow = {q: draw(st.one_of(st.none(), st.integers(0, 24))) for q in bound}
    lend = {q: draw(st.one_of(st.none(), st.integers(0, guarantees[q]))) for q in bound}
    capacity = {
        c: sum(guarantees[q] for q in bound if c in bound[q]) + draw(st.integers(0, 24)) for c in range(clusters)
    }
    return bound, guarantees, borrow, lend, capacity


def build(fleet) -> Snapshot:
    bound, guarantees, borrow, lend, capacity = fleet
    quotas = {
        (q, "h100"): QuotaState(
            q,
            "h100",
            g * UNIT,
            UNLIMITED if borrow[q] is None else borrow[q] * UNIT,
            None if lend[q] is None else lend[q] * UNIT,
        )
        for q, g in guarantees.items()
    }
    snap = Snapshot(
        quotas=quotas,
        paths={q: f"/{q % 2}/{q}/" for q in bound},
        names={q: f"q{q}" for q in bound},
        model_names={"h100": "H100"},
        unit=UNIT,
        bound=bound,
        cluster_names={c: f"c{c}" for c in capacity},
    )
    for c, gpus in capacity.items():
        snap.capacity_total[(c, "h100")] = gpus * UNIT
        snap.free_capacity[(c, "h100")] = gpus * UNIT
    return snap


def arrivals(min_size=0, max_size=40, tiers=TIERS):
    """(minute it arrives, queue, units, tier, runtime in minutes, cluster choice)."""
    return st.lists(
        st.tuples(
            st.integers(0, 600),
            st.integers(1, 5),
            st.sampled_from([1, 3, 7, 14, 28, 56]),
            st.sampled_from(tiers),
            st.integers(5, 240),
            st.integers(0, 1),
        ),
        min_size=min_size,
        max_size=max_size,
    )


def check(snap: Snapshot, capacity: dict[int, int]) -> None:
    for q in snap.quotas.values():
        assert q.used <= q.guaranteed + q.borrow_limit, "a queue holds more than its guarantee + borrow limit"
        assert q.own_used + q.lent <= q.guaranteed, "own use plus lent exceeds the guarantee"
    for c, gpus in capacity.items():
        on = sum(h.gpus for h in snap.held.values() if h.cluster == c)
        assert on <= gpus * UNIT, "the shares on a cluster add up to more than its GPUs"
    # What the engine keeps of what lenders could lend (moved by each admission, not recomputed) is exact.
    for (model, cluster), total in snap._lendable.items():
        assert total == sum(snap.lendable_of(q) for q in snap.lenders(model, cluster)), "cached lendable drifted"


def simulate(snap, fleet, stream, *, head=None, horizon_min=900):
    """Run the stream (and `head`, a Request) through passes at every arrival and end. Returns the minute the head
    was admitted (None: never) and the start of its first reservation."""
    bound, _g, _b, _l, capacity = fleet
    queues = sorted(bound)
    events = sorted(stream, key=lambda event: event[0])
    pending: dict[int, Request] = {}
    next_id = max([100, *snap.held]) + 1  # ids stay unique across calls on one snapshot
    head_start = first_reservation = None
    if head is not None:
        pending[head.id] = head
    minute = 0
    while minute <= horizon_min:
        now = T0 + timedelta(minutes=minute)
        for held in [h for h in snap.held.values() if h.ends_at is not None and h.ends_at <= now]:
            release(snap, held.id)
        while events and events[0][0] <= minute:
            _at, q, units, tier, runtime, pick = events.pop(0)
            queue = queues[(q - 1) % len(queues)]
            clusters = sorted(bound[queue])
            next_id += 1
            assert next_id not in snap.held
            pending[next_id] = Request(
                queue,
                "h100",
                units,
                tier,
                id=next_id,
                submitted_at=now,
                cluster=clusters[pick % len(clusters)],
                max_runtime_s=runtime * 60,
                name=f"w{next_id}",
            )
        results = admission_pass(snap, list(pending.values()), now)
        for request, result in results:
            if result.admitted or result.decision == Decision.REJECT:
                pending.pop(request.id)
                if head is not None and request.id == head.id and result.admitted:
                    head_start = now
            elif result.decision == Decision.RECLAIM:
                for victim, _units in result.reclaim:
                    assert snap.held[victim].tier.preemptible, "online inference chosen as a victim"
                    release(snap, victim)
            if result.reservation is not None and result.reservation.start is not None:
                pending[request.id] = replace(pending[request.id], reserved=True)
                if head is not None and request.id == head.id and first_reservation is None:
                    first_reservation = result.reservation.start
        check(snap, capacity)
        if head is not None and head_start is not None:
            break
        ends = [h.ends_at for h in snap.held.values() if h.ends_at is not None]
        upcoming = [T0 + timedelta(minutes=events[0][0])] if events else []
        if not ends and not upcoming:
            break
        nxt = min([*ends, *upcoming])
        minute = max(minute + 1, int((nxt - T0).total_seconds() // 60) + (1 if (nxt - T0).total_seconds() % 60 else 0))
    return head_start, first_reservation


@SETTINGS
@given(fleets(), arrivals())
def test_limits_capacity_and_inference_hold_under_any_stream(fleet, stream):
    snap = build(fleet)
    simulate(snap, fleet, stream)
    check(snap, fleet[4])


@SETTINGS
@given(fleets(), arrivals(), st.integers(1, 5), st.integers(0, 1), st.data())
def test_guarantees_are_honoured_after_reclaim(fleet, stream, q, pick, data):
    snap = build(fleet)
    bound = fleet[0]
    simulate(snap, fleet, stream, horizon_min=data.draw(st.integers(0, 300)))
    queue = sorted(bound)[(q - 1) % len(bound)]
    quota = snap.quotas[(queue, "h100")]
    clusters = sorted(bound[queue])
    cluster = clusters[pick % len(clusters)]
    free = quota.guaranteed - quota.own_used  # its guarantee not in its own use (lent GPUs come back by reclaim)
    if free <= 0:
        return
    need = data.draw(st.integers(1, free))
    request = Request(queue, "h100", need, TRAINING, cluster=cluster, id=10_000)
    snap.reservations.clear()
    snap.cluster_reservations.clear()
    snap.reserved_lenders.clear()
    snap.reclaiming.clear()
    snap.changed("h100")
    for _round in range(3):  # a lent guarantee first, then unguaranteed capacity on the cluster
        result = decide(snap, request)
        if result.decision != Decision.RECLAIM:
            break
        for victim, _units in result.reclaim:
            assert snap.held[victim].tier.preemptible
            release(snap, victim)
    assert result.decision == Decision.ADMIT, result.reason
    admit(snap, request, result, 10_000, T0)
    check(snap, fleet[4])


@SETTINGS
@given(fleets(), arrivals(min_size=1, tiers=[TRAINING, EXPLORATORY]), st.integers(1, 5), st.data())
def test_a_reserved_head_within_its_guarantee_starts_no_later_than_its_reservation(fleet, stream, q, data):
    snap = build(fleet)
    bound = fleet[0]
    queue = sorted(bound)[(q - 1) % len(bound)]
    quota = snap.quotas[(queue, "h100")]
    if quota.guaranteed == 0:
        return
    clusters = sorted(bound[queue])
    # Work already running when the head arrives, every runtime limited: its own queue's first (so that the head
    # has to wait for it), then others'.
    runtimes = st.integers(5, 240)
    for index, units in enumerate(data.draw(st.lists(st.sampled_from([1, 3, 7, 14]), min_size=1, max_size=8))):
        request = Request(
            queue,
            "h100",
            units,
            TRAINING,
            id=1000 + index,
            cluster=clusters[index % len(clusters)],
            max_runtime_s=data.draw(runtimes) * 60,
        )
        result = decide(snap, request)
        if result.admitted:
            admit(snap, request, result, request.id, T0)
    simulate(
        snap, fleet, [(0, *rest) for _at, *rest in data.draw(arrivals(max_size=8, tiers=[TRAINING]))], horizon_min=0
    )
    head = Request(
        queue,
        "h100",
        data.draw(st.integers(max(quota.free_in_guarantee, 0) + 1, quota.guaranteed))
        if quota.free_in_guarantee < quota.guaranteed
        else quota.guaranteed,
        # A head that may not borrow has to wait for its guarantee (one that may, often borrows at once).
        data.draw(st.sampled_from([TRAINING, STRICT])),
        id=1,
        submitted_at=T0,
        cluster=clusters[data.draw(st.integers(0, len(clusters) - 1))],
        max_runtime_s=3600,
        name="head",
    )
    later = [(at + 1, *rest) for at, *rest in stream]  # after the head: it is the first of its queue
    started, reserved = simulate(snap, fleet, later, head=head, horizon_min=3000)
    if reserved is None:  # it never had to wait with a known start
        return
    assert started is not None and started <= reserved, (started, reserved)
