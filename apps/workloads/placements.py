"""Where workloads run, read for the health app: which workloads a faulty node or GPU touches."""

from __future__ import annotations

from django.db import connection
from django.db.models import Q

from apps.workloads.models import Workload, WorkloadState


def placed_on_node(cluster_id: int, node: str, *, gpus: set[int] | None = None, ended_since=None) -> list[Workload]:
    """Workloads with a worker on `node` (and on one of `gpus`, when given): running or being placed, and
    those that ended since `ended_since` (their last placement is kept when they end)."""
    states = Q(state__in=[WorkloadState.ADMITTED, WorkloadState.RUNNING, WorkloadState.CANCELLING])
    if ended_since is not None:
        states |= Q(state__in=WorkloadState.terminal(), finished_at__gte=ended_since)
    candidates = Workload.objects.filter(states, cluster_id=cluster_id).select_related("tenant", "tier")
    if connection.vendor == "postgresql":  # jsonb containment narrows it in the index scan; SQLite filters below
        candidates = candidates.filter(placements__contains=[{"node": node}])
    out = []
    for workload in candidates:
        for placement in workload.placements or []:
            if placement.get("node") == node and (gpus is None or gpus & set(placement.get("gpus") or [])):
                out.append(workload)
                break
    return out
