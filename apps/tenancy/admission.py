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
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from apps.core.text import gettext_noop

UNLIMITED = math.inf


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
    """One queue's quota and current use for one GPU model."""

    queue: int
    model: str
    guaranteed: int
    borrow_limit: float = UNLIMITED  # how much beyond the guarantee the queue may hold
    lend_limit: float | None = None  # None: all of the guarantee may be lent
    weight: float = 1.0
    per_user_limit: float = UNLIMITED
    used: int = 0  # GPUs held by admitted work of this queue (own guarantee + borrowed)
    lent: int = 0  # GPUs of this queue's guarantee others hold now

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
    borrowed_from: dict[int, int] = field(default_factory=dict)  # lender queue -> GPUs


@dataclass(frozen=True)
class Request:
    queue: int
    model: str
    gpus: int
    tier: Tier
    gang: int = 1  # workers that must start together (all of `gpus` is one gang here)
    user: str = ""
    id: int | None = None
    submitted_at: datetime | None = None


@dataclass
class Result:
    decision: Decision
    reason: str = ""
    borrow: dict[int, int] = field(default_factory=dict)  # lender queue -> GPUs, for BORROW
    reclaim: list[tuple[int, int]] = field(default_factory=list)  # (held id, GPUs) for RECLAIM

    @property
    def admitted(self) -> bool:
        return self.decision in {Decision.ADMIT, Decision.BORROW}


@dataclass
class Snapshot:
    """Quota, use and capacity at one moment. `paths` are tenant-tree paths per queue ("/1/4/")."""

    quotas: dict[tuple[int, str], QuotaState]
    paths: dict[int, str]
    names: dict[int, str]  # queue id -> display name ("acme-llm/train")
    model_names: dict[str, str]  # code -> display name ("H100")
    free_capacity: dict[str, float] = field(default_factory=dict)  # physical free GPUs per model (inf: unknown)
    held: dict[int, Held] = field(default_factory=dict)
    # (queue, model) waiting to get lent GPUs back: they lend nothing more meanwhile, or the GPUs a reclaim
    # frees would be borrowed again at once by someone else (preemption thrash).
    reclaiming: set[tuple[int, str]] = field(default_factory=set)
    # Set by a snapshot built from aggregates (one decision): loads `held` the first time reclaim needs it.
    load_held: object = field(default=None, repr=False)
    load_lenders: object = field(default=None, repr=False)
    _loaded_queues: set[int] = field(default_factory=set, repr=False)
    user_used: dict[tuple[int, str, str], int] = field(default_factory=lambda: defaultdict(int))
    _lenders: dict[str, list[QuotaState]] = field(default_factory=dict, repr=False)
    _lendable: dict[str, int] = field(default_factory=dict, repr=False)

    def lenders(self, model: str) -> list[QuotaState]:
        if self.load_lenders is not None:  # a one-queue snapshot: read the other queues now
            load, self.load_lenders = self.load_lenders, None
            load(self)
            self._lenders.clear()
            self._lendable.clear()
        if model not in self._lenders:
            self._lenders[model] = [q for (_, m), q in self.quotas.items() if m == model]
        return self._lenders[model]

    def lendable_total(self, model: str, excluding: int | None = None) -> int:
        """What every queue but `excluding` could lend now (cached per model until use changes)."""
        if model not in self._lendable:
            self._lendable[model] = sum(self.lendable_of(q) for q in self.lenders(model))
        own = self.quotas.get((excluding, model)) if excluding is not None else None
        return self._lendable[model] - (self.lendable_of(own) if own is not None else 0)

    def lendable_of(self, quota: QuotaState) -> int:
        return 0 if (quota.queue, quota.model) in self.reclaiming else quota.lendable

    def changed(self, model: str) -> None:
        """Use or lending of `model` changed: drop what was cached about it."""
        self._lendable.pop(model, None)

    def capacity(self, model: str) -> float:
        return self.free_capacity.get(model, UNLIMITED)


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
BEHIND = gettext_noop("waiting behind earlier work in this queue")
VICTIMS_TAKEN = gettext_noop("%(reason)s (victims already being reclaimed)")
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
    BEHIND,
    VICTIMS_TAKEN,
)
# What each parameter looks like, so that a reason is split where it was joined ("%(head)s; %(lent)s lent out").
_NUMBER = r"-?\d+(?:\.\d+)?"
STORED_PARAMS = {
    **dict.fromkeys(
        ("free", "lent", "amount", "capacity", "used", "guaranteed", "borrowed", "total", "borrow", "need", "cap"),
        _NUMBER,
    ),
    "limit": rf"{_NUMBER}|{UNLIMITED_LIMIT}",
}
STORED_KNOWN = {"head", "why"}  # always reasons of their own (HEAD, NO_LENDER, ...)


def _gpus(snapshot: Snapshot, model: str, n: float) -> str:
    return f"{int(n)} × {snapshot.model_names.get(model, model)}"


def decide(snapshot: Snapshot, request: Request) -> Result:
    """Decide one request against the snapshot (which is not changed; see `admit` to apply)."""
    quota = snapshot.quotas.get((request.queue, request.model))
    name = snapshot.names.get(request.queue, str(request.queue))
    model = snapshot.model_names.get(request.model, request.model)
    need = request.gpus
    if quota is None:
        return Result(Decision.REJECT, NOT_IN_QUOTA % {"model": model, "queue": name})
    if need <= 0:
        return Result(Decision.REJECT, NO_GPUS)
    ceiling = quota.guaranteed if not request.tier.may_borrow else quota.max_total
    if need > ceiling:
        if not request.tier.may_borrow:
            why = CEILING_NO_BORROW % {"tier": request.tier.name, "guaranteed": quota.guaranteed}
        else:
            limit = UNLIMITED_LIMIT if quota.borrow_limit == UNLIMITED else int(quota.borrow_limit)
            why = CEILING % {"guaranteed": quota.guaranteed, "limit": limit}
        return Result(Decision.REJECT, NEVER_FITS % {"gpus": _gpus(snapshot, request.model, need), "why": why})
    if need > quota.per_user_limit:
        return Result(Decision.REJECT, OVER_USER_CAP % {"need": need, "cap": int(quota.per_user_limit)})
    if request.user and quota.per_user_limit != UNLIMITED:
        used = snapshot.user_used[(request.queue, request.model, request.user)]
        if used + need > quota.per_user_limit:
            return Result(
                Decision.QUEUE, AT_USER_CAP % {"user": request.user, "used": used, "cap": int(quota.per_user_limit)}
            )

    free = quota.free_in_guarantee
    capacity = snapshot.capacity(request.model)
    head = HEAD % {"gpus": _gpus(snapshot, request.model, need), "free": free}
    if need <= free:
        if need > capacity:
            return Result(Decision.QUEUE, NO_CAPACITY % {"head": head, "capacity": int(capacity), "model": model})
        return Result(
            Decision.ADMIT, WITHIN_GUARANTEE % {"used": quota.own_used + need, "guaranteed": quota.guaranteed}
        )

    # Guarantee lent out comes back before anything is borrowed (whatever the tier), so a queue never
    # borrows while its own guarantee is lent: own use + lent never exceeds the guarantee.
    if quota.lent > 0:
        amount = min(quota.lent, need - free)
        plan, freed = plan_reclaim(snapshot, request.queue, request.model, amount)
        if freed >= amount:
            reason = RECLAIMING % {"head": head, "lent": quota.lent, "amount": amount}
            return Result(Decision.RECLAIM, reason, reclaim=plan)
        return Result(Decision.QUEUE, WAITING_FOR_LENT % {"head": head, "amount": amount})
    if not request.tier.may_borrow:
        return Result(Decision.QUEUE, TIER_NEVER_BORROWS % {"head": head, "tier": request.tier.name})
    to_borrow = need - free
    if quota.borrowed + to_borrow > quota.borrow_limit:
        limit = {"head": head, "borrowed": quota.borrowed, "limit": int(quota.borrow_limit)}
        return Result(Decision.QUEUE, BORROW_LIMIT % limit)
    if snapshot.lendable_total(request.model, excluding=request.queue) < to_borrow:
        lenders = [q for q in snapshot.lenders(request.model) if q.queue != request.queue]
        total = snapshot.lendable_total(request.model, excluding=request.queue)
        if not lenders:
            why = NO_LENDER
        elif total == 0 and any(q.guaranteed - q.own_used - q.lent > 0 for q in lenders):
            why = LENDERS_AT_LIMIT
        elif total == 0:
            why = ALL_LENT
        else:
            why = ONLY_LENDABLE % {"total": total}
        return Result(Decision.QUEUE, BORROWING_BLOCKED % {"head": head, "why": why})
    if need > capacity:
        return Result(Decision.QUEUE, NO_CAPACITY % {"head": head, "capacity": int(capacity), "model": model})
    return Result(
        Decision.BORROW,
        BORROWS % {"free": free, "borrow": to_borrow},
        borrow=_pick_lenders(snapshot, request.queue, request.model, to_borrow),
    )


def _pick_lenders(snapshot: Snapshot, queue: int, model: str, amount: int) -> dict[int, int]:
    """Nearest lenders in the tenant tree first, then the ones with most to lend."""
    path = snapshot.paths.get(queue, "/")
    candidates = [q for q in snapshot.lenders(model) if q.queue != queue and snapshot.lendable_of(q) > 0]
    candidates.sort(key=lambda q: (-_common_depth(path, snapshot.paths.get(q.queue, "/")), -q.lendable, q.queue))
    picked: dict[int, int] = {}
    for lender in candidates:
        if amount <= 0:
            break
        take = min(snapshot.lendable_of(lender), amount)
        picked[lender.queue] = take
        amount -= take
    return picked


def admit(snapshot: Snapshot, request: Request, result: Result, held_id: int, now: datetime) -> Held:
    """Apply an ADMIT/BORROW result to the snapshot; returns the new holding."""
    quota = snapshot.quotas[(request.queue, request.model)]
    quota.used += request.gpus
    for lender, n in result.borrow.items():
        snapshot.quotas[(lender, request.model)].lent += n
    if request.model in snapshot.free_capacity:
        snapshot.free_capacity[request.model] -= request.gpus
    snapshot.user_used[(request.queue, request.model, request.user)] += request.gpus
    held = Held(
        held_id, request.queue, request.model, request.gpus, request.tier, now, request.user, dict(result.borrow)
    )
    snapshot.held[held_id] = held
    snapshot.changed(request.model)
    return held


def release(snapshot: Snapshot, held_id: int) -> None:
    """Give a holding's GPUs back (finished, cancelled or preempted)."""
    held = snapshot.held.pop(held_id)
    snapshot.quotas[(held.queue, held.model)].used -= held.gpus
    for lender, n in held.borrowed_from.items():
        snapshot.quotas[(lender, held.model)].lent -= n
    if held.model in snapshot.free_capacity:
        snapshot.free_capacity[held.model] += held.gpus
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
    borrowers = sorted(
        (h for h in snapshot.held.values() if h.queue == queue and h.model == model and h.borrowed_from),
        key=lambda h: -h.id,
    )
    borrowed = sum(sum(h.borrowed_from.values()) for h in borrowers)
    room = quota.guaranteed - (quota.used - borrowed) - quota.lent
    for held in borrowers:
        # Farthest lenders (other organizations) get theirs back first.
        path = snapshot.paths.get(queue, "/")
        for lender in sorted(held.borrowed_from, key=lambda q: _common_depth(path, snapshot.paths.get(q, "/"))):
            if room <= 0:
                return
            moved = min(room, held.borrowed_from[lender])
            held.borrowed_from[lender] -= moved
            snapshot.quotas[(lender, model)].lent -= moved
            room -= moved
            if held.borrowed_from[lender] == 0:
                del held.borrowed_from[lender]


def victim_order(held: Held) -> tuple:
    """Lowest tier first, then newest first."""
    return (held.tier.value, -held.admitted_at.timestamp(), -held.id)


def plan_reclaim(snapshot: Snapshot, lender: int, model: str, amount: int) -> tuple[list[tuple[int, int]], int]:
    """Which borrowing work to preempt so `lender` gets `amount` of its lent guarantee back.

    Only work borrowing from this lender frees its guarantee; non-preemptible tiers are never chosen.
    Returns ([(held id, GPUs)], GPUs of the lender's guarantee freed).
    """
    if snapshot.load_held is not None:
        snapshot.load_held(snapshot)
        snapshot.load_held = None
    victims = sorted(
        (h for h in snapshot.held.values() if h.model == model and h.borrowed_from.get(lender) and h.tier.preemptible),
        key=victim_order,
    )
    plan, freed = [], 0
    for held in victims:
        if freed >= amount:
            break
        plan.append((held.id, held.gpus))
        freed += held.borrowed_from[lender]
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


def admission_pass(snapshot: Snapshot, pending: list[Request], now: datetime) -> list[tuple[Request, Result]]:
    """Decide every pending request in order, admitting what fits as it goes (the snapshot is updated).

    RECLAIM results are returned with their plan but not applied: the workloads layer preempts
    the victims, and the request is admitted on a later pass once their GPUs are back.
    Non-preemptible work does not wait behind a blocked request; other work keeps strict order
    per (queue, model) so a large gang is not starved by small ones behind it.
    """
    results: list[tuple[Request, Result]] = []
    blocked: set[tuple[int, str]] = set()
    reclaiming: set[int] = set()
    for request in order_pending(snapshot, pending):
        k = (request.queue, request.model)
        if k in blocked:
            results.append((request, Result(Decision.QUEUE, BEHIND)))
            continue
        result = decide(snapshot, request)
        if result.decision == Decision.RECLAIM:
            snapshot.reclaiming.add(k)
            snapshot.changed(request.model)
            # Do not plan the same victims twice in one pass.
            if any(victim in reclaiming for victim, _ in result.reclaim):
                result = Result(Decision.QUEUE, VICTIMS_TAKEN % {"reason": result.reason})
            else:
                reclaiming.update(victim for victim, _ in result.reclaim)
        if result.admitted:
            admit(snapshot, request, result, request.id or -(len(results) + 1), now)
        elif result.decision in {Decision.QUEUE, Decision.RECLAIM}:
            blocked.add(k)
        results.append((request, result))
    return results


@dataclass
class Impact:
    """What a quota change would do to running work."""

    preempt: list[tuple[int, int]] = field(default_factory=list)  # (held id, GPUs)
    lose_borrowed: dict[int, int] = field(default_factory=dict)  # borrower queue -> GPUs it would lose
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

    * Its own work above the new ceiling is preempted, borrowing and lower-tier work first.
    * If its guarantee shrinks below what it has lent (or the new lend limit does), borrowers of it
      lose that much: their work is preempted, lowest tier and newest first.
    """
    impact = Impact()
    current = snapshot.quotas.get((queue, model))
    if current is None:
        impact.notes.append("new quota row: nothing running is affected")
        return impact
    own = sorted((h for h in snapshot.held.values() if h.queue == queue and h.model == model), key=victim_order)
    over = current.used - (guaranteed + borrow_limit)
    for held in own:
        if over <= 0:
            break
        if not held.tier.preemptible:
            impact.notes.append(f"{held.gpus} GPUs of non-preemptible work stay above the new quota")
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
