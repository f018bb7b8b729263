"""GPU utilization over time, for idle waste: from the cluster's backend when it has its own, else from the
health app's DCGM rollups.

`utilization_rollups(cluster, gpu_uuids, start, end)` answers, per GPU UUID, spans of [start, end)
with the GPU's DCGM utilization (DCGM_FI_DEV_GPU_UTIL, %) as 1-minute rollups would give it; minutes
with no data are left out (unknown, never counted as idle).

Sources:
- a backend with its own telemetry (`Backend.telemetry_in_process`, the simulator): its `gpu_utilization`,
  recomputed for past minutes from its allocation history (the same figure its exporter serves for that minute);
- every other cluster (Kubernetes, Slurm): the health app's 1-minute DCGM rollups (apps/health NodeRollup).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from apps.backends.registry import get_backend
from apps.backends.types import UtilizationSpan

MINUTE = timedelta(minutes=1)

__all__ = ["UtilizationSpan", "health_rollups", "utilization_rollups"]


def utilization_rollups(
    cluster, gpu_uuids: list[str], start: datetime, end: datetime
) -> dict[str, list[UtilizationSpan]]:
    if not gpu_uuids or end <= start:
        return {}
    backend = get_backend(cluster)
    if not backend.telemetry_in_process:
        return health_rollups(cluster, gpu_uuids, start, end)
    from apps.fleet.models import Gpu

    gpus = {
        uuid: (node, index)
        for uuid, node, index in Gpu.objects.filter(node__cluster=cluster, uuid__in=gpu_uuids).values_list(
            "uuid", "node__name", "index"
        )
    }
    return backend.gpu_utilization(gpus, start, end)


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
