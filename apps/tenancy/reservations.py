"""Reservations and backfill: work at the head of a queue that does not fit holds the capacity it waits for.

Pure Python, like the admission engine it serves (apps/tenancy/admission.py). The model is Slurm's backfill
scheduler (https://slurm.schedmd.com/sched_config.html, "Backfill scheduling"; SchedulerType=sched/backfill in
https://slurm.schedmd.com/slurm.conf.html): the first waiting job gets a reservation at the earliest time the
resources it waits for are expected to be free (the "shadow time"), computed from the time limits of what runs;
later, smaller work may start in front of it only if it ends before that time, or if it only takes what the
reserved job will not need then. Kueue and Volcano do not offer this (Kueue's StrictFIFO blocks, its
BestEffortFIFO lets smaller work pass and starve the head: https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/
"queueingStrategy").

The console's version, per GPU model:

* The head of a queue (the first request of the queue that waits, in the pass's order: tier, then fair share,
  then age) gets a reservation with its expected start: the time at which, by the max runtimes of what runs,
  both its queue's quota (its guarantee, and what it may borrow) and its cluster's free GPUs will cover it.
  Work without a runtime limit (an inference service) ends "never": a head that waits for it has no known start.
* Later work of the same queue starts in front of the head only if its max_runtime_s ends before that start,
  or if it fits in what the queue will have to spare at that start. With no known start, it waits (strict order).
* The first such head on a cluster also holds that cluster's capacity (one reservation per cluster and model,
  as Slurm's EASY backfill reserves for the top job): later work of other queues that would borrow GPUs on that
  cluster starts only if it ends before the start, or fits in what the cluster will have to spare. Work within
  its own queue's guarantee is never held back by another queue's reservation (a guarantee outranks borrowing,
  as in Kueue; a cluster's guarantees fit its GPUs together, so guaranteed work never takes what a head within
  its guarantee needs).
* While a head holds a reservation with a known start, its queue lends nothing of the model (lent GPUs would have
  to be reclaimed at the start).
* A head within its guarantee expects to start when its queue's own work has freed enough of the guarantee
  (and its cluster has the GPUs, which it then has: see above); so, with every runtime limited and nothing of a
  higher tier arriving, it starts no later than its first expected start (tests/tenancy/test_quota_properties.py).

Expected ends are admission time + max_runtime_s: the runtime limit is enforced by the backends (activeDeadline
on Kubernetes, --time on Slurm), so a job holds its GPUs no longer than that.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from apps.core.text import gettext_noop

if TYPE_CHECKING:
    from apps.tenancy.admission import Request, Snapshot

# Reasons (stored English, translated on pages: see STORED_TEMPLATES in apps/tenancy/admission.py).
BEHIND_RESERVATION = gettext_noop("waiting behind %(name)s, which holds a reservation from %(start)s")
CLUSTER_RESERVED = gettext_noop(
    "%(cluster)s's %(model)s are reserved for %(name)s from %(start)s; this would hold them longer"
)
RESERVED = gettext_noop("%(reason)s; reserved from %(start)s (expected start)")
RESERVED_UNKNOWN = gettext_noop("%(reason)s; reserved, start not known (it waits for work without a runtime limit)")
TIME_FORMAT = "%Y-%m-%d %H:%M UTC"
TIME_PATTERN = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC"


def to_minute(when: datetime) -> datetime:
    """Rounded up to the minute: an expected start is never early, and one pass after another does not rewrite
    it for the seconds between them."""
    if when.second or when.microsecond:
        return when.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return when


def show_time(when: datetime) -> str:
    """A start as reasons write it: UTC, to the minute (rounded up, so "starts at 14:05" is never early)."""
    return to_minute(when.astimezone(UTC)).strftime(TIME_FORMAT)


@dataclass
class Reservation:
    """Capacity held for the head of a queue from its expected start.

    `spare_queue` and `spare_cluster` are what the queue's quota and the cluster's free GPUs will have beyond
    the head's need at `start`: long-running work may still take those (each taking lowers them).
    """

    holder: int  # the waiting request (claim) id
    name: str
    queue: int
    model: str
    cluster: int | None
    units: int
    start: datetime | None  # None: not known (waits for work without a runtime limit)
    entitled: bool = False  # the head fits its queue's guarantee: it counts on nothing it would borrow
    spare_queue: float = 0
    spare_cluster: float = 0
    holds_cluster: bool = False  # the first head on its cluster and model: it holds the cluster's capacity too


def ends_before(request: Request, start: datetime | None, now: datetime | None) -> bool:
    """The request's runtime limit ends before `start` (Slurm's backfill condition)."""
    if start is None or now is None or request.max_runtime_s is None:
        return False
    return now + timedelta(seconds=request.max_runtime_s) <= start


def may_pass(snapshot: Snapshot, request: Request, own: Reservation) -> bool:
    """May `request` start in front of its queue's head `own`: it ends before the head's start, or fits what its
    queue will have to spare then."""
    return ends_before(request, own.start, snapshot.now) or (own.start is not None and request.gpus <= own.spare_queue)


def blocking(snapshot: Snapshot, request: Request, borrows: bool) -> Reservation | None:
    """The reservation that keeps `request` (about to be admitted, `borrows` or not) from starting now, if any.

    The request's own reservation never blocks it; one of its queue blocks it unless it ends before the
    start or fits the queue's spare; a cluster's blocks it (when it would run there) only if it borrows, and
    unless it ends before the start or fits the cluster's spare. Work within its own queue's guarantee never
    waits for another queue's reservation: guarantees fit the cluster together (an admin keeps a cluster's
    guarantees within its GPUs), so what the head waits for there is borrowed capacity coming back.
    """
    need = request.gpus
    own = snapshot.reservations.get((request.queue, request.model))
    if own is not None and own.holder != request.id and not may_pass(snapshot, request, own):
        return own
    held = snapshot.cluster_reservations.get((request.cluster, request.model))
    if (
        borrows
        and held is not None
        and held.queue != request.queue
        and held.holder != request.id
        and not ends_before(request, held.start, snapshot.now)
        and not need <= held.spare_cluster
    ):
        return held
    return None


def take_spare(snapshot: Snapshot, request: Request, borrows: bool) -> None:
    """`request` was admitted: what runs past a reservation's start comes out of that reservation's spare."""
    own = snapshot.reservations.get((request.queue, request.model))
    if own is not None and own.holder != request.id and not ends_before(request, own.start, snapshot.now):
        own.spare_queue -= request.gpus
    held = snapshot.cluster_reservations.get((request.cluster, request.model))
    if (
        borrows
        and held is not None
        and held.queue != request.queue
        and not ends_before(request, held.start, snapshot.now)
    ):
        held.spare_cluster -= request.gpus


def claim_label(name: str) -> str:
    """A claim's name as people read it: "a/gang" for "workload:a/gang" (the prefix says what made the claim)."""
    return name.partition(":")[2] or name


def held_reason(snapshot: Snapshot, reservation: Reservation, request: Request) -> str:
    if reservation.queue == request.queue:
        if reservation.start is None:
            from apps.tenancy.admission import BEHIND

            return BEHIND
        return BEHIND_RESERVATION % {"name": claim_label(reservation.name), "start": show_time(reservation.start)}
    return CLUSTER_RESERVED % {
        "cluster": snapshot.cluster_names.get(reservation.cluster, str(reservation.cluster)),
        "model": snapshot.model_names.get(request.model, request.model),
        "name": claim_label(reservation.name),
        "start": show_time(reservation.start),
    }


def _grouped(ends):
    """Entries of an iterator sorted by end, grouped by end: everything ending at the same moment frees at once."""
    group_end, group = None, []
    for entry in ends:
        if group and entry[0] != group_end:
            yield group_end, group
            group = []
        group_end = entry[0]
        group.append(entry)
    if group:
        yield group_end, group


def _first_time(free: float, need: int, ends) -> tuple[datetime | None, float]:
    """When `free` plus what ends (sorted (end, units)) first covers `need`, and what is spare then."""
    if need <= free:
        return None, free - need
    total = free
    for end, group in _grouped(ends):
        total += sum(units for _end, units in group)
        if total >= need:
            return end, total - need
    return datetime.max.replace(tzinfo=UTC), -1


def _quota_time(quota, need: int, borrowable: float, ends: list) -> tuple[datetime | None, float]:
    """When the queue's quota first covers `need` as its work ends (sorted (end, own use freed, lent back)).

    Its free guarantee at a moment is the guarantee minus its use (up to the guarantee) minus what it has lent:
    when its own work ends, work of it that borrows moves onto the guarantee first (as `rebalance` does). A head
    that must borrow adds what it may borrow then (within its borrow limit, up to `borrowable`).
    """

    def available(used: float, lent: float) -> float:
        free = max(quota.guaranteed - min(used, quota.guaranteed) - lent, 0)
        if borrowable:
            borrowed = max(used - quota.guaranteed, 0)
            free += max(min(quota.borrow_limit - borrowed, borrowable), 0)
        return free

    used, lent = quota.used, quota.lent
    if need <= available(used, lent):
        return None, available(used, lent) - need
    for end, group in _grouped(ends):
        used -= sum(freed for _end, freed, _back in group)
        lent -= sum(back for _end, _freed, back in group)
        if need <= available(used, lent):
            return end, available(used, lent) - need
    return datetime.max.replace(tzinfo=UTC), -1


def plan(snapshot: Snapshot, request: Request) -> Reservation:
    """The reservation of a head that does not fit now: its expected start and what is spare then.

    Quota: what the queue may use now (free guarantee, and what it could borrow), plus what its own work and
    work borrowing from it free as they end. Capacity: the cluster's free GPUs plus what ends there.
    The start is the later of the two; `None` when either waits for work without a runtime limit.
    """
    now = snapshot.now
    quota = snapshot.quotas[(request.queue, request.model)]
    need = request.gpus
    entitled = need <= quota.guaranteed
    # A head within its guarantee counts on nothing it would borrow (borrowable GPUs may be gone by its start);
    # one that must borrow counts on what it could borrow now: its start is an estimate.
    borrowable = 0
    if request.tier.may_borrow and not entitled:
        lendable = snapshot.lendable_total(request.model, request.cluster, excluding=request.queue)
        borrowable = lendable + snapshot.pool_free(request.cluster, request.model)
    # What ends, in order: the queue's own work frees its use, work borrowing from it returns what it lent.
    quota_ends = heapq.merge(
        ((end, units, 0) for end, _id, units in snapshot.ends("queue", request.queue, request.model)),
        ((end, 0, units) for end, _id, units in snapshot.ends("lender", request.queue, request.model)),
    )
    capacity_ends = ((end, units) for end, _id, units in snapshot.ends("cluster", request.cluster, request.model))
    quota_at, spare_queue = _quota_time(quota, need, borrowable, quota_ends)
    capacity = snapshot.capacity(request.cluster, request.model)
    if capacity == math.inf:  # capacity not known (no nodes synced): only the quota decides
        capacity_at, spare_cluster = None, math.inf
    else:
        capacity_at, spare_cluster = _first_time(capacity, need, capacity_ends)
    starts = [t for t in (quota_at, capacity_at) if t is not None]
    start = max(starts) if starts else now
    if start is not None and start.year == datetime.max.year:
        start = None  # what it waits for never ends by any runtime limit: no known start
    elif start is not None:
        start = to_minute(start)
    return Reservation(
        holder=request.id if request.id is not None else -1,
        name=request.name or str(request.id),
        queue=request.queue,
        model=request.model,
        cluster=request.cluster,
        units=need,
        start=start,
        entitled=entitled,
        spare_queue=max(spare_queue, 0),
        spare_cluster=max(spare_cluster, 0),
    )


STORED_TEMPLATES = (BEHIND_RESERVATION, CLUSTER_RESERVED, RESERVED, RESERVED_UNKNOWN)
