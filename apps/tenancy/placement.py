"""Placement: which of a queue's bound clusters a new request goes to, and why.

A queue's guarantee is usable on any cluster it is bound to; borrowing, lending and capacity are per cluster
(apps/tenancy/admission.py). A submission that names no cluster is decided on each bound cluster that can run
it, and goes where it fits best now: within its guarantee before borrowing, borrowing before reclaiming,
reclaiming before waiting; among equals, where most of its guarantee is free on the cluster now (the smaller of
its free guarantee and the cluster's free GPUs), then by name. Pure Python, on the engine's snapshot.

Where a claim waits is decided here once: a pending claim waits on its cluster (its workload was rendered for
it), and the admission pass decides it there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from apps.backends.shares import SHARE_PATTERN
from apps.core.text import gettext_noop
from apps.tenancy.admission import Decision, Request, Result, Snapshot, decide

PLACED = gettext_noop("%(reason)s; on %(cluster)s (free within guarantee now, per cluster: %(clusters)s)")
_RANK = {Decision.ADMIT: 0, Decision.BORROW: 1, Decision.RECLAIM: 2, Decision.QUEUE: 3, Decision.REJECT: 4}


@dataclass
class Placed:
    cluster: int | None
    result: Result
    reason: str  # the result's reason, with the clusters compared when there were several


def free_here(snapshot: Snapshot, request: Request, cluster: int | None) -> float:
    """What the request's queue could use on `cluster` now without borrowing: its free guarantee, as far as
    the cluster has free GPUs."""
    quota = snapshot.quotas.get((request.queue, request.model))
    if quota is None:
        return 0
    return min(quota.free_in_guarantee, snapshot.capacity(cluster, request.model))


def place(snapshot: Snapshot, request: Request, clusters: list[int]) -> Placed:
    """Decide `request` on each of `clusters` (ids, in name order) and keep the best; no clusters: cluster None."""
    if not clusters:
        result = decide(snapshot, request)
        return Placed(None, result, result.reason)
    options = []
    for index, cluster in enumerate(clusters):
        candidate = replace(request, cluster=cluster)
        result = decide(snapshot, candidate)
        free = free_here(snapshot, candidate, cluster)
        options.append((_RANK[result.decision], -free, index, cluster, result, free))
    _rank, _free, _index, cluster, result, _ = min(options, key=lambda option: option[:3])
    if len(clusters) == 1:
        return Placed(cluster, result, result.reason)
    compared = ", ".join(
        f"{snapshot.cluster_names.get(c, str(c))} {snapshot.show(max(free, 0))}"
        for *_unused, c, _result, free in sorted(options, key=lambda option: option[:3])
    )
    reason = PLACED % {
        "reason": result.reason,
        "cluster": snapshot.cluster_names.get(cluster, str(cluster)),
        "clusters": compared,
    }
    return Placed(cluster, result, reason)


STORED_TEMPLATES = (PLACED,)
# "sim-b 16, sim-a 0": cluster names (DNS labels) with shares.
_ENTRY = rf"[a-z0-9][a-z0-9-]* (?:{SHARE_PATTERN})"
STORED_PARAMS = {"clusters": rf"{_ENTRY}(?:, {_ENTRY})*"}
