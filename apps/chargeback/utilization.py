"""GPU utilization over time, for idle waste: one small interface, one source per kind of cluster.

`utilization_rollups(cluster, gpu_uuids, start, end)` answers, per GPU UUID, spans of [start, end)
with the GPU's DCGM utilization (DCGM_FI_DEV_GPU_UTIL, %) as 1-minute rollups would give it; minutes
with no data are left out (unknown, never counted as idle).

Sources:
- simulated clusters: the simulator's own telemetry model, recomputed for past minutes from its
  allocation history (the same figure its exporter serves for that minute);
- Kubernetes and Slurm clusters: the health app's 1-minute DCGM rollups (apps/health NodeRollup).
Another source plugs in through `register_source`, with no change to metering or statements.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

MINUTE = timedelta(minutes=1)
# Above this load, the simulator's per-minute jitter (85-99 % of the load) cannot take a GPU below a
# few percent, so a constant-load stretch is one span at its mean; below it, minute by minute.
_FINE_LOAD = 0.06


@dataclass(frozen=True)
class UtilizationSpan:
    start: datetime
    end: datetime
    utilization_pct: float


Source = Callable[[object, list[str], datetime, datetime], dict[str, list[UtilizationSpan]]]
_SOURCES: dict[str, Source] = {}


def register_source(cluster_kind: str, source: Source) -> None:
    """Use `source` for clusters of `cluster_kind` (the health app registers its DCGM rollups here)."""
    _SOURCES[cluster_kind] = source


def utilization_rollups(
    cluster, gpu_uuids: list[str], start: datetime, end: datetime
) -> dict[str, list[UtilizationSpan]]:
    source = _SOURCES.get(cluster.kind)
    if source is None or not gpu_uuids or end <= start:
        return {}
    return source(cluster, gpu_uuids, start, end)


def simulator_rollups(
    cluster, gpu_uuids: list[str], start: datetime, end: datetime
) -> dict[str, list[UtilizationSpan]]:
    """The simulator's utilization: each GPU's load from its allocation history, with its telemetry jitter."""
    from apps.backends.models import SimAllocation, SimCluster
    from apps.backends.simulator.seeding import stable_hash
    from apps.backends.simulator.telemetry import utilization_pct
    from apps.fleet.models import Gpu

    sim = SimCluster.objects.filter(cluster=cluster).first()
    if sim is None:
        return {}
    seed = sim.fleet_shape().seed
    where = dict(Gpu.objects.filter(node__cluster=cluster, uuid__in=gpu_uuids).values_list("uuid", "node__name"))
    index_of = dict(Gpu.objects.filter(node__cluster=cluster, uuid__in=gpu_uuids).values_list("uuid", "index"))
    by_gpu: dict[tuple[str, int], list[tuple[datetime, datetime, float]]] = defaultdict(list)
    for node, indexes, share, started, ended in (
        SimAllocation.objects.filter(sim=sim, node__in=set(where.values()), started_at__lt=end)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
        .values_list("node", "gpu_indexes", "share", "started_at", "ended_at")
    ):
        for index in indexes:
            by_gpu[(node, index)].append((max(started, start), min(ended or end, end), share))
    out: dict[str, list[UtilizationSpan]] = {}
    for uuid, node in where.items():
        spans = []
        for seg_start, seg_end, load in _constant_loads(by_gpu.get((node, index_of[uuid]), []), start, end):
            if load <= 0 or load >= _FINE_LOAD:
                spans.append(UtilizationSpan(seg_start, seg_end, min(100.0, load * 92)))
                continue
            minute = seg_start.replace(second=0, microsecond=0)
            while minute < seg_end:
                jitter = stable_hash(seed, uuid, int(minute.timestamp() // 60))
                spans.append(
                    UtilizationSpan(
                        max(minute, seg_start), min(minute + MINUTE, seg_end), utilization_pct(load, jitter)
                    )
                )
                minute += MINUTE
        out[uuid] = spans
    return out


def _constant_loads(allocations, start: datetime, end: datetime):
    """(start, end, load) stretches of constant summed load over [start, end), from (start, end, share) allocations."""
    changes: dict[datetime, float] = defaultdict(float)
    for seg_start, seg_end, share in allocations:
        if seg_end > seg_start:
            changes[seg_start] += share
            changes[seg_end] -= share
    points = sorted({start, end, *changes})
    load = 0.0
    for left, right in itertools.pairwise(points):
        load += changes.get(left, 0.0)
        if left >= start and right <= end and right > left:
            yield left, right, round(load, 9)


def health_rollups(cluster, gpu_uuids: list[str], start: datetime, end: datetime) -> dict[str, list[UtilizationSpan]]:
    """The health app's 1-minute DCGM rollups (NodeRollup): each minute's average DCGM_FI_DEV_GPU_UTIL.

    A minute is rolled up when it is over, so the last minute of a metering interval may not be
    there yet; it then counts as unknown (not idle).
    """
    from apps.fleet.models import Gpu
    from apps.health.models import NodeRollup

    where = {
        uuid: (node_id, str(index))
        for uuid, node_id, index in Gpu.objects.filter(node__cluster=cluster, uuid__in=gpu_uuids).values_list(
            "uuid", "node_id", "index"
        )
    }
    by_node: dict[int, list[tuple[datetime, dict]]] = defaultdict(list)
    for node_id, minute, data in NodeRollup.objects.filter(
        node_id__in={n for n, _ in where.values()}, minute__gte=start - MINUTE, minute__lt=end
    ).values_list("node_id", "minute", "data"):
        by_node[node_id].append((minute, data))
    out: dict[str, list[UtilizationSpan]] = {}
    for uuid, (node_id, index) in where.items():
        spans = []
        for minute, data in sorted(by_node.get(node_id, []), key=lambda item: item[0]):
            cell = (data.get(index) or {}).get(UTIL_METRIC)
            left, right = max(minute, start), min(minute + MINUTE, end)
            if cell and right > left:
                spans.append(UtilizationSpan(left, right, float(cell[1])))
        out[uuid] = spans
    return out


UTIL_METRIC = "DCGM_FI_DEV_GPU_UTIL"
register_source("simulated", simulator_rollups)
register_source("kubernetes", health_rollups)
register_source("slurm", health_rollups)
