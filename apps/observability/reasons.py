"""Why work waits or is turned away, in a few categories, from the reasons admission and backends give.

Admission reasons come from apps/tenancy/admission.py ("free within guarantee", "capacity: only 3
h100 free", "per-user cap ..."); a backend's pending reason from its scheduler (the simulator's
"needs 4 × 8 h100 ...; largest fit is 2"). The categories are what a user can act on: ask for
quota, wait for capacity, reshape the job, wait for the cluster, or talk to the platform team.
"""

from __future__ import annotations

QUOTA, CAPACITY, FRAGMENTATION, BACKEND, POLICY, OTHER = (
    "quota",
    "capacity",
    "fragmentation",
    "backend unavailable",
    "policy",
    "other",
)
CATEGORIES = (QUOTA, CAPACITY, FRAGMENTATION, BACKEND, POLICY, OTHER)

_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (BACKEND, ("retry", "unreachable", "backend", "connection", "timed out")),
    (POLICY, ("per-user cap", "never borrows", "budget", "policy")),
    (CAPACITY, ("capacity:", "are reserved for")),  # a cluster's GPUs held for another queue's reservation
    (FRAGMENTATION, ("largest fit", "no node", "nodes in this cluster", "nodes with nvlink")),
    (QUOTA, ("guarantee", "lent", "borrow", "quota", "waiting behind", "reclaim")),
)


def reason_category(reason: str) -> str:
    text = (reason or "").lower()
    for category, needles in _RULES:
        if any(needle in text for needle in needles):
            return category
    return OTHER
