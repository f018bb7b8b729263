"""Admission, ordering, reclaim and what-if over an in-memory snapshot of quota and usage.

Pure Python: `apps.tenancy.snapshot` builds a `Snapshot` from the database in a constant number of
queries, and these functions decide. The semantics follow Kueue's ClusterQueue/Cohort model
(reference: queues-quotas-priorities.md §1 and §6), generalised to the tenant tree:

* Each queue holds, per GPU model, a `guaranteed` amount (Kueue nominalQuota). It may use more by
  borrowing other queues' unused guarantee, up to its `borrow_limit` (None: unlimited).
* A queue lends at most `lend_limit` of its guarantee (None: all of its unused guarantee); the rest
  of its guarantee stays exclusive (Kueue: nominalQuota - lendingLimit).
* Lenders are tried nearest first in the tenant tree (siblings before cousins), like hierarchical
  cohorts.
* A tier that may not borrow (online-inference) must fit within the guarantee; it is never a
  reclaim victim.
* Lent GPUs come back by reclaim: victims are borrowing workloads, lowest tier first, then newest.
* Pending work is ordered by tier value (high first), then fair share (borrowed share of the
  lendable pool divided by weight, low first: Kueue's dominant resource share), then age.

Three generalisations of that model (issue 19):

* **Shares.** Every amount counts whole units of 1/`Snapshot.unit` GPU (a snapshot built from the database
  uses apps.backends.shares.SHARE_UNITS; the engine's own tests count whole GPUs with unit 1), so a 1/7 MIG
  slice uses 1/7 of a GPU of quota, not a whole one. Reasons show shares as "6 3/7".
* **Clusters.** A request and a holding may name the cluster they run on. A queue's guarantee is usable on
  any cluster it is bound to (`Snapshot.bound`); borrowing, lending and reclaim happen only between queues
  bound to the cluster the work runs on (Kueue's cohorts live within one cluster), and physical capacity is
  per cluster. Without cluster information (no `bound`), every queue shares with every other, as before.
* **Unguaranteed capacity.** GPUs of a cluster that no queue bound there guarantees (its allocatable GPUs minus
  those queues' guarantees) form a pool every queue there may borrow from within its borrow limit (lender key
  `POOL`). It is borrowed from first, and it is the first taken back: work within its guarantee that finds no
  free GPU on its cluster reclaims pool borrowers there (lowest tier, then newest).
* **Reservations and backfill**: apps/tenancy/reservations.py.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from apps.backends.shares import SHARE_PATTERN, format_share
from apps.core.text import gettext_noop
from apps.tenancy import reservations
from apps.tenancy.reservations import TIME_PATTERN, Reservation

UNLIMITED = math.inf
POOL = -1  # the lender key of unguaranteed capacity in `borrowed_from` (no queue has a negative id)


class Decision(StrEnum):
    ADMIT = "admit"  # within the queue's guarantee
    BORROW = "borrow"  # admitted, partly on other queues' unused guarantee
    RECLAIM = "reclaim"  # fits the guarantee once lent GPUs come back: see `reclaim` plan
    QUEUE = "queue"  # waits; `reason` says why
    REJECT = "reject"  # can never fit; `reason` says why


@dataclass(frozen=True)
class Tier:
    name: str
    value: int
    preemptible: bool = True
    may_borrow: bool = True


@dataclass
class QuotaState:
    """One queue's quota and current use for one GPU model, in units of 1/Snapshot.unit GPU."""

    queue: int
    model: str
    guaranteed: int
    borrow_limit: float = UNLIMITED  # how much beyond the guarantee the queue may hold
    lend_limit: float | None = None  # None: all of the guarantee may be lent
    weight: float = 1.0
    per_user_limit: float = UNLIMITED
    used: int = 0  # held by admitted work of this queue (own guarantee + borrowed)
    lent: int = 0  # of this queue's guarantee, what others hold now

    @property
    def own_used(self) -> int:
        return min(self.used, self.guaranteed)

    @property
    def borrowed(self) -> int:
        return max(self.used - self.guaranteed, 0)

    @property
    def free_in_guarantee(self) -> int:
        """What the queue can use right now without borrowing or reclaiming."""
        return max(self.guaranteed - self.own_used - self.lent, 0)

    @property
    def lendable(self) -> int:
        """What others may borrow from this queue right now."""
        cap = self.guaranteed if self.lend_limit is None else min(self.lend_limit, self.guaranteed)
        return int(max(min(self.guaranteed - self.own_used, cap) - self.lent, 0))

    @property
    def max_total(self) -> float:
        return self.guaranteed + self.borrow_limit


@dataclass
class Held:
    """Admitted work holding GPUs: what reclaim and what-if may take back."""

    id: int
    queue: int
    model: str
    gpus: int
    tier: Tier
    admitted_at: datetime
    user: str = ""
    borrowed_from: dict[int, int] = field(default_factory=dict)  # lender queue (or POOL) -> units
    cluster: int | None = None  # where it runs
    ends_at: datetime | None = None  # admitted_at + max runtime; None: no runtime limit


@dataclass(frozen=True)
class Request:
    queue: int
    model: str
    gpus: int  # units of 1/Snapshot.unit GPU
    tier: Tier
    gang: int = 1  # workers that must start together (all of `gpus` is one gang here)
    user: str = ""
    id: int | None = None
    submitted_at: datetime | None = None
    cluster: int | None = None  # where it would run (None: anywhere; the engine's own tests)
    max_runtime_s: int | None = None  # its runtime limit (None: none): backfill needs it
    name: str = ""
    reserved: bool = False  # held a reservation with a known start in the last pass: its queue lends nothing


@dataclass
class Result:
    decision: Decision
    reason: str = ""
    borrow: dict[int, int] = field(default_factory=dict)  # lender queue (or POOL) -> units, for BORROW
    reclaim: list[tuple[int, int]] = field(default_factory=list)  # (held id, units) for RECLAIM
    reservation: Reservation | None = None  # QUEUE at the head of its queue: what it holds and from when
    held_by: Reservation | None = None  # QUEUE because this reservation holds what it would take

    @property
    def admitted(self) -> bool:
        return self.decision in {Decision.ADMIT, Decision.BORROW}


@dataclass
class Snapshot:
    """Quota, use and capacity at one moment. `paths` are tenant-tree paths per queue ("/1/4/").

    Amounts count units of 1/`unit` GPU. `free_capacity` and `capacity_total` are per (cluster, model): free
    units now and allocatable units in all; cluster None stands for the whole fleet (no cluster information).
    """

    quotas: dict[tuple[int, str], QuotaState]
    paths: dict[int, str]
    names: dict[int, str]  # queue id -> display name ("acme-llm/train")
    model_names: dict[str, str]  # code -> display name ("H100")
    free_capacity: dict[tuple[int | None, str], float] = field(default_factory=dict)  # missing: unknown
    capacity_total: dict[tuple[int | None, str], float] = field(default_factory=dict)  # for the unguaranteed pool
    held: dict[int, Held] = field(default_factory=dict)
    # (queue, model) waiting to get lent GPUs back: they lend nothing more meanwhile, or the GPUs a reclaim
    # frees would be borrowed again at once by someone else (preemption thrash).
    reclaiming: set[tuple[int, str]] = field(default_factory=set)
    # (queue, model) whose head holds a reservation with a known start: they lend nothing meanwhile.
    reserved_lenders: set[tuple[int, str]] = field(default_factory=set)
    unit: int = 1  # units per GPU
    bound: dict[int, frozenset[int]] = field(default_factory=dict)  # queue -> clusters it is bound to
    cluster_names: dict[int, str] = field(default_factory=dict)
    now: datetime | None = None  # for reservations and backfill (None: no time, no backfill by runtime)
    # Reservations of heads that wait: per (queue, model), and the one holding each (cluster, model).
    reservations: dict[tuple[int, str], Reservation] = field(default_factory=dict)
    cluster_reservations: dict[tuple[int | None, str], Reservation] = field(default_factory=dict)
    # Set by a snapshot built from aggregates (one decision): loads `held` the first time reclaim needs it.
    load_held: object = field(default=None, repr=False)
    load_lenders: object = field(default=None, repr=False)
    _loaded_queues: set[int] = field(default_factory=set, repr=False)
    user_used: dict[tuple[int, str, str], int] = field(default_factory=lambda: defaultdict(int))
    # Pool use per (cluster, model), when not derived from `held` (a one-decision snapshot reads it as a sum).
    pool_used: dict[tuple[int | None, str], int] = field(default_factory=lambda: defaultdict(int))
    _lenders: dict[tuple[str, int | None], list[QuotaState]] = field(default_factory=dict, repr=False)
    _lendable: dict[tuple[str, int | None], int] = field(default_factory=dict, repr=False)
    _guaranteed_on: dict[tuple[int | None, str], int] = field(default_factory=dict, repr=False)
    # When held work ends, sorted, per ("queue"|"cluster"|"lender", id, model): what reservations are planned on.
    # Built on first use; admissions add to it, anything else that changes holdings drops it.
    _ends: dict[tuple, list[tuple[datetime, int, int]]] | None = field(default=None, repr=False)

    def on_cluster(self, queue: int, cluster: int | None) -> bool:
        """May `queue` run on `cluster` (and so lend or borrow there)? Always, without cluster information."""
        return cluster is None or not self.bound or cluster in self.bound.get(queue, ())

    def lenders(self, model: str, cluster: int | None = None) -> list[QuotaState]:
        if self.load_lenders is not None:  # a one-queue snapshot: read the other queues now
            load, self.load_lenders = self.load_lenders, None
            load(self)
            self._lenders.clear()
            self._lendable.clear()
            self._guaranteed_on.clear()
        key = (model, cluster)
        if key not in self._lenders:
            self._lenders[key] = [
                q for (_, m), q in self.quotas.items() if m == model and self.on_cluster(q.queue, cluster)
            ]
        return self._lenders[key]

    def lendable_total(self, model: str, cluster: int | None = None, excluding: int | None = None) -> int:
        """What every queue on `cluster` but `excluding` could lend now (cached until use changes)."""
        key = (model, cluster)
        if key not in self._lendable:
            self._lendable[key] = sum(self.lendable_of(q) for q in self.lenders(model, cluster))
        own = self.quotas.get((excluding, model)) if excluding is not None else None
        mine = self.lendable_of(own) if own is not None and self.on_cluster(own.queue, cluster) else 0
        return self._lendable[key] - mine

    def lendable_of(self, quota: QuotaState) -> int:
        key = (quota.queue, quota.model)
        if key in self.reclaiming or key in self.reserved_lenders:
            return 0
        reserved = self.reservations.get(key)
        if reserved is not None and reserved.start is not None:
            return 0  # its head will need its guarantee at the start: lent GPUs would have to be reclaimed
        return quota.lendable

    def stop_lending(self, queue: int, model: str, reason: set | None = None) -> None:
        """(queue, model) lends nothing from now on (its head holds a reservation, or it reclaims: `reason` is the
        set that says so): the cached totals lose what it could lend, without recomputing every lender."""
        before = self.lending_now(model, [queue])
        (self.reserved_lenders if reason is None else reason).add((queue, model))
        self.lending_changed(model, before)

    def lending_now(self, model: str, queues) -> dict[int, int]:
        """What each of `queues` could lend now (to pass to `lending_changed` after changing them)."""
        return {q: self.lendable_of(self.quotas[(q, model)]) for q in queues if (q, model) in self.quotas}

    def lending_changed(self, model: str, before: dict[int, int]) -> None:
        """The queues of `before` changed (use, lending, or whether they lend): move the cached totals by the
        difference instead of dropping them (a pass over 10,000 claims would recompute them at every admission)."""
        for queue, was in before.items():
            delta = self.lendable_of(self.quotas[(queue, model)]) - was
            if delta:
                for key in self._lendable:
                    if key[0] == model and self.on_cluster(queue, key[1]):
                        self._lendable[key] += delta

    def changed(self, model: str) -> None:
        """Use or lending of `model` changed: drop what was cached about it."""
        for key in [k for k in self._lendable if k[0] == model]:
            del self._lendable[key]

    def capacity(self, cluster: int | None, model: str) -> float:
        """Free units on `cluster` now (the whole fleet's for None); unlimited when not known."""
        return self.free_capacity.get((cluster, model), UNLIMITED)

    def guaranteed_on(self, cluster: int | None, model: str) -> int:
        """What queues that may run on `cluster` guarantee of `model` (a queue bound to two clusters counts on each:
        its guarantee may be claimed on either)."""
        key = (cluster, model)
        if key not in self._guaranteed_on:
            self._guaranteed_on[key] = sum(q.guaranteed for q in self.lenders(model, cluster))
        return self._guaranteed_on[key]

    def unguaranteed(self, cluster: int | None, model: str) -> int:
        """Units of `cluster` no queue there guarantees: the pool every queue there may borrow from."""
        total = self.capacity_total.get((cluster, model))
        if total is None or total == UNLIMITED:
            return 0
        return int(max(total - self.guaranteed_on(cluster, model), 0))

    def pool_in_use(self, cluster: int | None, model: str) -> int:
        return self.pool_used[(cluster, model)]

    def pool_free(self, cluster: int | None, model: str) -> int:
        unguaranteed = self.unguaranteed(cluster, model)  # first: it reads the lenders (and the pool's use)
        return max(unguaranteed - self.pool_in_use(cluster, model), 0) if unguaranteed else 0

    def held_of(self, model: str) -> list[Held]:
        """Admitted work of `model` (loads it first in a one-decision snapshot)."""
        if self.load_held is not None:
            load, self.load_held = self.load_held, None
            load(self)
        return [h for h in self.held.values() if h.model == model]

    def ends(self, kind: str, key: int | None, model: str) -> list[tuple[datetime, int, int]]:
        """[(ends_at, held id, units)] sorted by end, of held work with a runtime limit of `model`: a queue's own
        ("queue"), all on a cluster ("cluster"), or what borrows from a lender ("lender", units lent by it)."""
        if self._ends is None:
            self.held_of(model)  # loads them in a one-decision snapshot
            self._ends = defaultdict(list)
            for held in self.held.values():
                self._index_end(held)
            for entries in self._ends.values():
                entries.sort()
        return self._ends.get((kind, key, model), [])

    def _index_end(self, held: Held, insert: bool = False) -> None:
        if held.ends_at is None:
            return
        add = bisect.insort if insert else list.append
        add(self._ends[("queue", held.queue, held.model)], (held.ends_at, held.id, held.gpus))
        add(self._ends[("cluster", held.cluster, held.model)], (held.ends_at, held.id, held.gpus))
        for lender, units in held.borrowed_from.items():
            add(self._ends[("lender", lender, held.model)], (held.ends_at, held.id, units))

    def show(self, units: float) -> str:
        """An amount for reasons: "6 3/7", "16"."""
        if units == UNLIMITED:
            return UNLIMITED_LIMIT
        return format_share(int(units), self.unit)


def _common_depth(a: str, b: str) -> int:
    parts_a, parts_b = a.strip("/").split("/"), b.strip("/").split("/")
    depth = 0
    for x, y in zip(parts_a, parts_b, strict=False):
        if x != y:
            break
        depth += 1
    return depth


# Reasons are stored in English (Admission.reason, a workload's state_reason), the API returns them as they are
# and apps/observability/reasons.py sorts them by their words. Pages translate them by recognising these
# templates (STORED_TEMPLATES, apps/core/stored_text.py): change a reason here, not in an f-string.
NOT_IN_QUOTA = gettext_noop("GPU model %(model)s is not in queue %(queue)s's quota")
NO_GPUS = gettext_noop("a request needs at least one GPU")
NEVER_FITS = gettext_noop("needs %(gpus)s, more than it can ever get: %(why)s")
CEILING_NO_BORROW = gettext_noop("tier %(tier)s never borrows and the guarantee is %(guaranteed)s")
CEILING = gettext_noop("the queue holds at most %(guaranteed)s guaranteed + %(limit)s borrowed")
UNLIMITED_LIMIT = gettext_noop("unlimited")
OVER_USER_CAP = gettext_noop("needs %(need)s GPUs; the per-user cap is %(cap)s")
AT_USER_CAP = gettext_noop("per-user cap: %(user)s holds %(used)s of %(cap)s")
HEAD = gettext_noop("needs %(gpus)s; %(free)s free within guarantee")
NO_CAPACITY = gettext_noop("%(head)s; capacity: only %(capacity)s %(model)s free in the fleet")
NO_CAPACITY_ON = gettext_noop("%(head)s; capacity: only %(capacity)s %(model)s free on %(cluster)s")
POOL_RECLAIM = gettext_noop(
    "%(head)s; capacity: only %(capacity)s %(model)s free on %(cluster)s: reclaiming %(amount)s borrowed from "
    "unguaranteed capacity"
)
WITHIN_GUARANTEE = gettext_noop("within guarantee (%(used)s of %(guaranteed)s)")
RECLAIMING = gettext_noop("%(head)s; %(lent)s lent out: reclaiming %(amount)s")
WAITING_FOR_LENT = gettext_noop("%(head)s; waiting for %(amount)s lent GPUs to come back")
TIER_NEVER_BORROWS = gettext_noop("%(head)s; tier %(tier)s never borrows")
BORROW_LIMIT = gettext_noop("%(head)s; borrow limit reached (%(borrowed)s of %(limit)s borrowed)")
BORROWING_BLOCKED = gettext_noop("%(head)s; borrowing blocked: %(why)s")
NO_LENDER = gettext_noop("no other queue has a guarantee to lend")
LENDERS_AT_LIMIT = gettext_noop("lenders at their lend limit")
ALL_LENT = gettext_noop("every lender's unused guarantee is already lent or in use")
ONLY_LENDABLE = gettext_noop("only %(total)s lendable")
BORROWS = gettext_noop("%(free)s within guarantee + %(borrow)s borrowed")
BORROWS_POOL = gettext_noop("%(free)s within guarantee + %(borrow)s borrowed (%(pool)s of it unguaranteed capacity)")
BEHIND = gettext_noop("waiting behind earlier work in this queue")
VICTIMS_TAKEN = gettext_noop("%(reason)s (victims already being reclaimed)")
BACKFILLED = gettext_noop("%(reason)s; ends before %(name)s's reserved start")
STORED_TEMPLATES = (
    NOT_IN_QUOTA,
    NO_GPUS,
    NEVER_FITS,
    CEILING_NO_BORROW,
    CEILING,
    UNLIMITED_LIMIT,
    OVER_USER_CAP,
    AT_USER_CAP,
    HEAD,
    NO_CAPACITY,
    NO_CAPACITY_ON,
    POOL_RECLAIM,
    WITHIN_GUARANTEE,
    RECLAIMING,
    WAITING_FOR_LENT,
    TIER_NEVER_BORROWS,
    BORROW_LIMIT,
    BORROWING_BLOCKED,
    NO_LENDER,
    LENDERS_AT_LIMIT,
    ALL_LENT,
    ONLY_LENDABLE,
    BORROWS,
    BORROWS_POOL,
    BEHIND,
    VICTIMS_TAKEN,
    BACKFILLED,
    *reservations.STORED_TEMPLATES,
)
# What each parameter looks like, so that a reason is split where it was joined ("%(head)s; %(lent)s lent out").
# Amounts are shares: "16", "3/7", "6 3/7", "0.122" (apps/backends/shares.format_share).
_NUMBER = SHARE_PATTERN
STORED_PARAMS = {
    **dict.fromkeys(
        (
            "free",
            "lent",
            "amount",
            "capacity",
            "used",
            "guaranteed",
            "borrowed",
            "total",
            "borrow",
            "need",
            "cap",
            "pool",
        ),
        _NUMBER,
    ),
    "limit": rf"{_NUMBER}|{UNLIMITED_LIMIT}",
    "start": TIME_PATTERN,
}
STORED_KNOWN = {"head", "why"}  # always reasons of their own (HEAD, NO_LENDER, ...)


def _gpus(snapshot: Snapshot, model: str, n: float) -> str:
    return f"{snapshot.show(n)} × {snapshot.model_names.get(model, model)}"


def _no_capacity(snapshot: Snapshot, request: Request, head: str, capacity: float) -> str:
    model = snapshot.model_names.get(request.model, request.model)
    if request.cluster is None:
        return NO_CAPACITY % {"head": head, "capacity": snapshot.show(capacity), "model": model}
    cluster = snapshot.cluster_names.get(request.cluster, str(request.cluster))
    return NO_CAPACITY_ON % {"head": head, "capacity": snapshot.show(capacity), "model": model, "cluster": cluster}


def decide(snapshot: Snapshot, request: Request) -> Result:
    """Decide one request against the snapshot (which is not changed; see `admit` to apply).

    A request that would start now but is held by a reservation (its queue's head, or its cluster's) waits,
    unless it backfills (apps/tenancy/reservations.py)."""
    result = _decide(snapshot, request)
    if result.admitted and (snapshot.reservations or snapshot.cluster_reservations):
        holder = reservations.blocking(snapshot, request, borrows=bool(result.borrow))
        if holder is not None:
            return Result(Decision.QUEUE, reservations.held_reason(snapshot, holder, request), held_by=holder)
        before = _ends_before_a_reservation(snapshot, request)
        if before is not None:
            result.reason = BACKFILLED % {"reason": result.reason, "name": before.name}
    return result


def _ends_before_a_reservation(snapshot: Snapshot, request: Request) -> Reservation | None:
    for reservation in (
        snapshot.reservations.get((request.queue, request.model)),
        snapshot.cluster_reservations.get((request.cluster, request.model)),
    ):
        if (
            reservation is not None
            and reservation.holder != request.id
            and reservations.ends_before(request, reservation.start, snapshot.now)
        ):
            return reservation
    return None


def _decide(snapshot: Snapshot, request: Request) -> Result:
    quota = snapshot.quotas.get((request.queue, request.model))
    name = snapshot.names.get(request.queue, str(request.queue))
    model = snapshot.model_names.get(request.model, request.model)
    need = request.gpus
    show = snapshot.show
    if quota is None:
        return Result(Decision.REJECT, NOT_IN_QUOTA % {"model": model, "queue": name})
    if need <= 0:
        return Result(Decision.REJECT, NO_GPUS)
    ceiling = quota.guaranteed if not request.tier.may_borrow else quota.max_total
    if need > ceiling:
        if not request.tier.may_borrow:
            why = CEILING_NO_BORROW % {"tier": request.tier.name, "guaranteed": show(quota.guaranteed)}
        else:
            limit = UNLIMITED_LIMIT if quota.borrow_limit == UNLIMITED else show(quota.borrow_limit)
            why = CEILING % {"guaranteed": show(quota.guaranteed), "limit": limit}
        return Result(Decision.REJECT, NEVER_FITS % {"gpus": _gpus(snapshot, request.model, need), "why": why})
    if need > quota.per_user_limit:
        return Result(Decision.REJECT, OVER_USER_CAP % {"need": show(need), "cap": show(quota.per_user_limit)})
    if request.user and quota.per_user_limit != UNLIMITED:
        used = snapshot.user_used[(request.queue, request.model, request.user)]
        if used + need > quota.per_user_limit:
            return Result(
                Decision.QUEUE,
                AT_USER_CAP % {"user": request.user, "used": show(used), "cap": show(quota.per_user_limit)},
            )

    free = quota.free_in_guarantee
    capacity = snapshot.capacity(request.cluster, request.model)
    if need <= free:
        if need > capacity:
            head = HEAD % {"gpus": _gpus(snapshot, request.model, need), "free": show(free)}
            return _short_of_capacity(snapshot, request, head, capacity)
        return Result(
            Decision.ADMIT,
            WITHIN_GUARANTEE % {"used": show(quota.own_used + need), "guaranteed": show(quota.guaranteed)},
        )
    head = HEAD % {"gpus": _gpus(snapshot, request.model, need), "free": show(free)}

    # Guarantee lent out comes back before anything is borrowed (whatever the tier), so a queue never
    # borrows while its own guarantee is lent: own use + lent never exceeds the guarantee.
    if quota.lent > 0:
        amount = min(quota.lent, need - free)
        plan, freed = plan_reclaim(snapshot, request.queue, request.model, amount, request.cluster)
        if freed >= amount:
            reason = RECLAIMING % {"head": head, "lent": show(quota.lent), "amount": show(amount)}
            return Result(Decision.RECLAIM, reason, reclaim=plan)
        return Result(Decision.QUEUE, WAITING_FOR_LENT % {"head": head, "amount": show(amount)})
    if not request.tier.may_borrow:
        return Result(Decision.QUEUE, TIER_NEVER_BORROWS % {"head": head, "tier": request.tier.name})
    to_borrow = need - free
    if quota.borrowed + to_borrow > quota.borrow_limit:
        limit = {"head": head, "borrowed": show(quota.borrowed), "limit": show(quota.borrow_limit)}
        return Result(Decision.QUEUE, BORROW_LIMIT % limit)
    pool = snapshot.pool_free(request.cluster, request.model)
    from_queues = snapshot.lendable_total(request.model, request.cluster, excluding=request.queue)
    if from_queues + pool < to_borrow:
        lenders = [q for q in snapshot.lenders(request.model, request.cluster) if q.queue != request.queue]
        total = from_queues + pool
        if not lenders and not total:
            why = NO_LENDER
        elif total == 0 and any(q.guaranteed - q.own_used - q.lent > 0 for q in lenders):
            why = LENDERS_AT_LIMIT
        elif total == 0:
            why = ALL_LENT
        else:
            why = ONLY_LENDABLE % {"total": show(total)}
        return Result(Decision.QUEUE, BORROWING_BLOCKED % {"head": head, "why": why})
    if need > capacity:
        return Result(Decision.QUEUE, _no_capacity(snapshot, request, head, capacity))
    borrow = _pick_lenders(snapshot, request.queue, request.model, to_borrow, request.cluster)
    if borrow.get(POOL):
        reason = BORROWS_POOL % {"free": show(free), "borrow": show(to_borrow), "pool": show(borrow[POOL])}
    else:
        reason = BORROWS % {"free": show(free), "borrow": show(to_borrow)}
    return Result(Decision.BORROW, reason, borrow=borrow)


def _short_of_capacity(snapshot: Snapshot, request: Request, head: str, capacity: float) -> Result:
    """Within its guarantee, but its cluster has too few free GPUs: take back what the pool lent there."""
    missing = request.gpus - capacity
    plan, freed = plan_pool_reclaim(snapshot, request.cluster, request.model, missing)
    if plan and freed >= missing:
        reason = POOL_RECLAIM % {
            "head": head,
            "capacity": snapshot.show(capacity),
            "model": snapshot.model_names.get(request.model, request.model),
            "cluster": snapshot.cluster_names.get(request.cluster, str(request.cluster)),
            "amount": snapshot.show(freed),
        }
        return Result(Decision.RECLAIM, reason, reclaim=plan)
    return Result(Decision.QUEUE, _no_capacity(snapshot, request, head, capacity))


def _pick_lenders(
    snapshot: Snapshot, queue: int, model: str, amount: int, cluster: int | None = None
) -> dict[int, int]:
    """Unguaranteed capacity first (it costs no queue its guarantee), then the nearest lenders in the tenant
    tree, then the ones with most to lend."""
    picked: dict[int, int] = {}
    pool = min(snapshot.pool_free(cluster, model), amount)
    if pool > 0:
        picked[POOL] = pool
        amount -= pool
    path = snapshot.paths.get(queue, "/")
    candidates = [q for q in snapshot.lenders(model, cluster) if q.queue != queue and snapshot.lendable_of(q) > 0]
    candidates.sort(key=lambda q: (-_common_depth(path, snapshot.paths.get(q.queue, "/")), -q.lendable, q.queue))
    for lender in candidates:
        if amount <= 0:
            break
        take = min(snapshot.lendable_of(lender), amount)
        picked[lender.queue] = take
        amount -= take
    return picked


def _ends_at(request: Request, now: datetime) -> datetime | None:
    return now + timedelta(seconds=request.max_runtime_s) if request.max_runtime_s is not None else None


def admit(snapshot: Snapshot, request: Request, result: Result, held_id: int, now: datetime) -> Held:
    """Apply an ADMIT/BORROW result to the snapshot; returns the new holding."""
    quota = snapshot.quotas[(request.queue, request.model)]
    before = snapshot.lending_now(request.model, [request.queue, *(q for q in result.borrow if q != POOL)])
    quota.used += request.gpus
    for lender, n in result.borrow.items():
        if lender == POOL:
            snapshot.pool_used[(request.cluster, request.model)] += n
        else:
            snapshot.quotas[(lender, request.model)].lent += n
    key = (request.cluster, request.model)
    if key in snapshot.free_capacity:
        snapshot.free_capacity[key] -= request.gpus
    snapshot.user_used[(request.queue, request.model, request.user)] += request.gpus
    if snapshot.reservations or snapshot.cluster_reservations:
        reservations.take_spare(snapshot, request, borrows=bool(result.borrow))
    held = Held(
        held_id,
        request.queue,
        request.model,
        request.gpus,
        request.tier,
        now,
        request.user,
        dict(result.borrow),
        request.cluster,
        _ends_at(request, now),
    )
    snapshot.held[held_id] = held
    if snapshot._ends is not None:
        snapshot._index_end(held, insert=True)
    snapshot.lending_changed(request.model, before)
    return held


def release(snapshot: Snapshot, held_id: int) -> None:
    """Give a holding's GPUs back (finished, cancelled or preempted)."""
    held = snapshot.held.pop(held_id)
    snapshot._ends = None
    snapshot.quotas[(held.queue, held.model)].used -= held.gpus
    for lender, n in held.borrowed_from.items():
        if lender == POOL:
            snapshot.pool_used[(held.cluster, held.model)] -= n
        else:
            snapshot.quotas[(lender, held.model)].lent -= n
    key = (held.cluster, held.model)
    if key in snapshot.free_capacity:
        snapshot.free_capacity[key] += held.gpus
    snapshot.user_used[(held.queue, held.model, held.user)] -= held.gpus
    snapshot.changed(held.model)
    rebalance(snapshot, held.queue, held.model)


def rebalance(snapshot: Snapshot, queue: int, model: str) -> None:
    """When a queue's own guarantee frees up while it still borrows, its borrowed GPUs move onto it.

    Borrowing is use above the guarantee (as in Kueue); this keeps each holder's `borrowed_from`
    equal to that, so lenders get back what the borrower no longer needs to borrow.
    """
    quota = snapshot.quotas[(queue, model)]
    snapshot.changed(model)
    snapshot._ends = None
    borrowers = sorted(
        (h for h in snapshot.held.values() if h.queue == queue and h.model == model and h.borrowed_from),
        key=lambda h: -h.id,
    )
    borrowed = sum(sum(h.borrowed_from.values()) for h in borrowers)
    room = quota.guaranteed - (quota.used - borrowed) - quota.lent
    path = snapshot.paths.get(queue, "/")
    for held in borrowers:
        # Farthest lenders (other organizations) get theirs back first; the unguaranteed pool last.
        order = sorted(held.borrowed_from, key=lambda q: (q == POOL, _common_depth(path, snapshot.paths.get(q, "/"))))
        for lender in order:
            if room <= 0:
                return
            moved = min(room, held.borrowed_from[lender])
            held.borrowed_from[lender] -= moved
            if lender == POOL:
                snapshot.pool_used[(held.cluster, model)] -= moved
            else:
                snapshot.quotas[(lender, model)].lent -= moved
            room -= moved
            if held.borrowed_from[lender] == 0:
                del held.borrowed_from[lender]


def victim_order(held: Held) -> tuple:
    """Lowest tier first, then newest first."""
    return (held.tier.value, -held.admitted_at.timestamp(), -held.id)


def plan_reclaim(
    snapshot: Snapshot, lender: int, model: str, amount: int, cluster: int | None = None
) -> tuple[list[tuple[int, int]], int]:
    """Which borrowing work to preempt so `lender` gets `amount` of its lent guarantee back.

    Only work borrowing from this lender frees its guarantee; non-preemptible tiers are never chosen.
    Work on `cluster` (where the lender's request would run) goes first: it frees GPUs there too.
    Returns ([(held id, units)], units of the lender's guarantee freed).
    """
    victims = sorted(
        (h for h in snapshot.held_of(model) if h.borrowed_from.get(lender) and h.tier.preemptible),
        key=lambda h: (cluster is not None and h.cluster != cluster, *victim_order(h)),
    )
    plan, freed = [], 0
    for held in victims:
        if freed >= amount:
            break
        plan.append((held.id, held.gpus))
        freed += held.borrowed_from[lender]
    return plan, freed


def plan_pool_reclaim(
    snapshot: Snapshot, cluster: int | None, model: str, amount: float
) -> tuple[list[tuple[int, int]], int]:
    """Which work borrowing unguaranteed capacity on `cluster` to preempt to free `amount` units there.

    Pool borrowers are the first victims when a guarantee needs the GPUs; non-preemptible tiers never are.
    Returns ([(held id, units)], units freed on the cluster).
    """
    victims = sorted(
        (
            h
            for h in snapshot.held_of(model)
            if h.borrowed_from.get(POOL) and h.tier.preemptible and (cluster is None or h.cluster == cluster)
        ),
        key=victim_order,
    )
    plan, freed = [], 0
    for held in victims:
        if freed >= amount:
            break
        plan.append((held.id, held.gpus))
        freed += held.gpus
    return plan, freed


def fair_share(snapshot: Snapshot, queue: int, model: str) -> float:
    """Borrowed GPUs as a share of what the cohort could lend, divided by weight (Kueue's DRS, one resource)."""
    quota = snapshot.quotas.get((queue, model))
    if quota is None or quota.borrowed == 0:
        return 0.0
    pool = (
        sum(q.guaranteed if q.lend_limit is None else min(q.lend_limit, q.guaranteed) for q in snapshot.lenders(model))
        or 1
    )
    return (quota.borrowed / pool) / (quota.weight if quota.weight > 0 else 1e-9)


def order_pending(snapshot: Snapshot, pending: list[Request]) -> list[Request]:
    """Tier (high first), then fair share (low first), then age (old first)."""
    shares: dict[tuple[int, str], float] = {}

    def key(request: Request):
        k = (request.queue, request.model)
        if k not in shares:
            shares[k] = fair_share(snapshot, *k)
        submitted = request.submitted_at.timestamp() if request.submitted_at else 0.0
        return (-request.tier.value, shares[k], submitted, request.id or 0)

    return sorted(pending, key=key)


def admission_pass(
    snapshot: Snapshot, pending: list[Request], now: datetime, *, reserve: bool = True
) -> list[tuple[Request, Result]]:
    """Decide every pending request in order, admitting what fits as it goes (the snapshot is updated).

    RECLAIM results are returned with their plan but not applied: the workloads layer preempts
    the victims, and the request is admitted on a later pass once their GPUs are back.
    Non-preemptible work does not wait behind a blocked request. The first request of a queue and model
    that waits gets a reservation (`reserve`, apps/tenancy/reservations.py): later work of its queue, and
    of its cluster, passes it only by backfilling. Without `reserve` the queue keeps strict order behind it.
    """
    results: list[tuple[Request, Result]] = []
    blocked: set[tuple[int, str]] = set()
    reclaiming: set[int] = set()
    snapshot.now = now
    snapshot.reservations.clear()
    snapshot.cluster_reservations.clear()
    # Heads that held a reservation keep their queue from lending from the start of the pass (work of a higher
    # tier, decided before them, would otherwise borrow what they were promised).
    snapshot.reserved_lenders = {(r.queue, r.model) for r in pending if r.reserved} if reserve else set()
    snapshot._lendable.clear()
    for request in order_pending(snapshot, pending):
        k = (request.queue, request.model)
        if not reserve and k in blocked:
            results.append((request, Result(Decision.QUEUE, BEHIND)))
            continue
        held = snapshot.reservations.get(k) if reserve else None
        if held is not None and held.holder != request.id and not reservations.may_pass(snapshot, request, held):
            # Behind its queue's head and no backfill: it waits, whatever it would decide (as strict order does).
            results.append(
                (request, Result(Decision.QUEUE, reservations.held_reason(snapshot, held, request), held_by=held))
            )
            continue
        result = decide(snapshot, request)
        if result.decision == Decision.RECLAIM:
            snapshot.stop_lending(request.queue, request.model, snapshot.reclaiming)
            # Do not plan the same victims twice in one pass.
            if any(victim in reclaiming for victim, _ in result.reclaim):
                result = Result(Decision.QUEUE, VICTIMS_TAKEN % {"reason": result.reason})
            else:
                reclaiming.update(victim for victim, _ in result.reclaim)
        if result.admitted:
            admit(snapshot, request, result, request.id or -(len(results) + 1), now)
        elif result.decision in {Decision.QUEUE, Decision.RECLAIM} and k not in blocked:
            blocked.add(k)
            if reserve:
                _reserve(snapshot, request, result)
        results.append((request, result))
    return results


def plan_reservation(snapshot: Snapshot, request: Request, result: Result) -> tuple[Reservation | None, str]:
    """What `request`, waiting with `result`, would hold as the head of its queue, and its reason with the expected
    start ("...; reserved from 2026-12-01 14:20 UTC (expected start)"): the pass's own words. Changes nothing:
    `_reserve` applies it in a pass, and a submission's dry run shows it (apps/tenancy/services/admissions.py).

    None when the queue already has a head (it waits behind that one), or when it waits for its own user's work
    (per-user cap: it holds nothing, the others of its queue go on)."""
    key = (request.queue, request.model)
    if key in snapshot.reservations or result.reason.startswith(AT_USER_CAP.split("%", 1)[0]):
        return None, result.reason
    if result.decision == Decision.RECLAIM or result.held_by is not None:
        # Waiting for a reclaim, or behind another queue's reservation on its cluster: its place in its queue only.
        holder = request.id if request.id is not None else -1
        name = request.name or str(request.id)
        waits = Reservation(holder, name, request.queue, request.model, request.cluster, request.gpus, None)
        return waits, result.reason
    reservation = reservations.plan(snapshot, request)
    reason = result.reason
    if reservation.start is None:
        reason = reservations.RESERVED_UNKNOWN % {"reason": result.reason}
    elif reservation.start <= snapshot.now:
        reservation.start = None  # it fits by the numbers yet waits (victims being reclaimed): keep order
    else:
        reason = reservations.RESERVED % {"reason": result.reason, "start": reservations.show_time(reservation.start)}
    return reservation, reason


def _reserve(snapshot: Snapshot, request: Request, result: Result) -> None:
    """The head of its queue waits: it holds what it waits for (see apps/tenancy/reservations.py and
    `plan_reservation`)."""
    key = (request.queue, request.model)
    reservation, result.reason = plan_reservation(snapshot, request, result)
    if reservation is None:
        return
    snapshot.stop_lending(request.queue, request.model)  # before it holds: what it lent counts until now
    snapshot.reservations[key] = reservation
    held = (request.cluster, request.model)
    if reservation.start is not None and held not in snapshot.cluster_reservations:
        reservation.holds_cluster = True  # the first head on its cluster (Slurm's EASY backfill: one reservation)
        snapshot.cluster_reservations[held] = reservation
    result.reservation = reservation


@dataclass
class Impact:
    """What a quota change would do to running work."""

    preempt: list[tuple[int, int]] = field(default_factory=list)  # (held id, units)
    lose_borrowed: dict[int, int] = field(default_factory=dict)  # borrower queue -> units it would lose
    notes: list[str] = field(default_factory=list)

    @property
    def disruptive(self) -> bool:
        return bool(self.preempt)


def preview_quota_change(
    snapshot: Snapshot,
    queue: int,
    model: str,
    *,
    guaranteed: int,
    borrow_limit: float = UNLIMITED,
    lend_limit: float | None = None,
) -> Impact:
    """What would be preempted if (queue, model)'s quota became this (the snapshot is not changed).

    The new values are whole GPUs (as quota rows hold them); the snapshot counts units of 1/unit GPU.

    * Its own work above the new ceiling is preempted, borrowing and lower-tier work first.
    * If its guarantee shrinks below what it has lent (or the new lend limit does), borrowers of it
      lose that much: their work is preempted, lowest tier and newest first.
    """
    impact = Impact()
    unit = snapshot.unit
    guaranteed *= unit
    borrow_limit = borrow_limit * unit if borrow_limit != UNLIMITED else UNLIMITED
    lend_limit = lend_limit * unit if lend_limit is not None else None
    current = snapshot.quotas.get((queue, model))
    if current is None:
        impact.notes.append("new quota row: nothing running is affected")
        return impact
    own = sorted((h for h in snapshot.held_of(model) if h.queue == queue), key=victim_order)
    over = current.used - (guaranteed + borrow_limit)
    for held in own:
        if over <= 0:
            break
        if not held.tier.preemptible:
            impact.notes.append(f"{snapshot.show(held.gpus)} GPUs of non-preemptible work stay above the new quota")
            continue
        impact.preempt.append((held.id, held.gpus))
        over -= held.gpus
    # The lender side: how much of what is lent must come back.
    new_own_used = min(current.used, guaranteed)
    cap = guaranteed if lend_limit is None else min(lend_limit, guaranteed)
    can_lend = max(min(guaranteed - new_own_used, cap), 0)
    excess = current.lent - can_lend
    if excess > 0:
        plan, _ = plan_reclaim(snapshot, queue, model, excess)
        for held_id, gpus in plan:
            held = snapshot.held[held_id]
            impact.preempt.append((held_id, gpus))
            impact.lose_borrowed[held.queue] = impact.lose_borrowed.get(held.queue, 0) + held.borrowed_from[queue]
    return impact
