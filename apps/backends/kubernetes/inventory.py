"""Nodes and their pods as the console's Inventory. Pure: dicts from the API in, NodeInfo out.

Kubernetes counts GPUs per node (`nvidia.com/gpu` capacity and allocatable) but does not say which device
a pod holds or expose GPU UUIDs on the Node. So each GPU here is index 0..capacity-1 with a stable
synthetic UUID "<node uid>/gpu<index>"; the GPUs the device plugin withholds (capacity - allocatable)
are the last indexes and reported unhealthy; pods take indexes in creation order. Counts are exact,
index assignment is the console's bookkeeping (DCGM telemetry carries the real UUIDs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apps.backends.kubernetes import pods as podinfo
from apps.backends.kubernetes.nodes import CORDON_BY, CORDON_REASON
from apps.backends.render.objects import PRODUCT_LABEL
from apps.backends.render.workload.context import DEFAULT_TOPOLOGY_LABELS
from apps.backends.types import GpuInfo, NodeInfo, Taint

MEMORY_LABEL = "nvidia.com/gpu.memory"
COUNT_LABEL = "nvidia.com/gpu.count"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
POOL_PURPOSE_LABEL = "gpu-console/pool-purpose"
PURPOSES = {"online-inference", "batch-training", "dev"}
DEFAULT_POOL_LABELS = (
    "gpu-console/pool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
)
PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")


@dataclass(frozen=True)
class InventorySettings:
    """The cluster's label conventions (connection settings `topology_labels` and `pool_labels`)."""

    rack_label: str = "gpu-console/rack"
    leaf_label: str = DEFAULT_TOPOLOGY_LABELS["leaf"]
    nvlink_label: str = DEFAULT_TOPOLOGY_LABELS["nvlink"]
    pool_labels: tuple[str, ...] = DEFAULT_POOL_LABELS

    @classmethod
    def from_connection(cls, settings: dict) -> InventorySettings:
        topology = settings.get("topology_labels") or {}
        return cls(
            rack_label=topology.get("rack", cls.rack_label),
            leaf_label=topology.get("leaf", cls.leaf_label),
            nvlink_label=topology.get("nvlink", cls.nvlink_label),
            pool_labels=tuple(settings.get("pool_labels") or DEFAULT_POOL_LABELS),
        )


@dataclass
class _Holder:
    workload: str
    whole: int
    fraction: float


@dataclass
class NodePods:
    """Pods placed on one node that hold GPUs, in creation order."""

    holders: list[_Holder] = field(default_factory=list)


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _quantity_mib(value: str) -> int:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024, "K": 1000 / 2**20, "M": 10**6 / 2**20}
    units["G"] = 10**9 / 2**20
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return int(float(value[: -len(suffix)]) * factor)
    try:
        return int(float(value) / 2**20)
    except ValueError:
        return 0


def _cores(value: str) -> int:
    return int(float(value[:-1]) / 1000) if value.endswith("m") else _int(value)


def _gpu_resources(resources: dict) -> int:
    """GPUs in a capacity/allocatable map: nvidia.com/gpu plus per-model nvidia.com/gpu-<model> names."""
    total = 0
    for name, value in resources.items():
        if podinfo.is_gpu_resource(name):
            total += _int(value)
    return total


def extended_resources(allocatable: dict) -> dict[str, int]:
    """The node's allocatable extended resources other than GPUs (an RDMA device plugin's rdma/ib, a host-device
    network's nvidia.com/hostdev), in name order: a domain-prefixed name outside kubernetes.io
    (https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources)."""
    return {
        name: _int(value)
        for name, value in sorted(allocatable.items())
        if "/" in name
        and not name.split("/")[0].endswith("kubernetes.io")
        and not podinfo.is_gpu_resource(name)
        and not name.startswith(podinfo.MIG_PREFIX)
    }


def node_state(node: dict) -> tuple[str, str]:
    """(ready | not-ready | down, why) from the node's conditions."""
    conditions = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}
    ready = conditions.get("Ready")
    pressures = [t for t in PRESSURE if (conditions.get(t) or {}).get("status") == "True"]
    if ready is None or ready.get("status") == "Unknown":
        why = (ready or {}).get("message") or "the kubelet stopped posting node status"
        return "down", why
    if ready.get("status") != "True":
        why = f"{ready.get('reason', 'NotReady')}: {ready.get('message', '')}".rstrip(": ")
        return "not-ready", "; ".join([why, *pressures])
    return "ready", ", ".join(pressures)


def gpu_holder(pod: dict) -> tuple[tuple[str, str], str, _Holder] | None:
    """A pod that holds GPUs on a node, placed and not finished (terminating pods still hold their GPUs), as
    (its creation order key, its node, what it holds); None for any other pod."""
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or (pod.get("status") or {}).get("phase") in podinfo.FINISHED:
        return None
    whole, fraction = podinfo.gpu_share(pod)
    if not (whole or fraction):
        return None
    meta = pod["metadata"]
    return (meta.get("creationTimestamp", ""), meta["name"]), node, _Holder(podinfo.workload_id(pod), whole, fraction)


def group_holders(holders: list[tuple[tuple[str, str], str, _Holder]]) -> dict[str, NodePods]:
    """`gpu_holder`s (in list order) by node, in creation order."""
    by_node: dict[str, NodePods] = {}
    for _key, node, holder in sorted(holders, key=lambda h: h[0]):
        by_node.setdefault(node, NodePods()).holders.append(holder)
    return by_node


def group_pods(pods: list[dict]) -> dict[str, NodePods]:
    """GPU-holding pods by node: placed, not finished (terminating pods still hold their GPUs)."""
    return group_holders([h for pod in pods if (h := gpu_holder(pod)) is not None])


def node_info(node: dict, pods: NodePods | None, settings: InventorySettings) -> NodeInfo:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    labels = meta.get("labels") or {}
    capacity = _gpu_resources(status.get("capacity") or {})
    allocatable = min(_gpu_resources(status.get("allocatable") or {}), capacity)
    mig_enabled = any(k.startswith(podinfo.MIG_PREFIX) for k in status.get("capacity") or {}) or labels.get(
        MIG_CONFIG_LABEL, "all-disabled"
    ) not in ("", "all-disabled")
    # With MIG's single strategy nvidia.com/gpu counts MIG instances, with time-slicing or MPS it counts replicas:
    # GPU Feature Discovery's count label has the physical GPUs, and a pod's GPU is a share of one.
    replicas = max(_int(labels.get(REPLICAS_LABEL, "1")), 1)
    shared = replicas > 1 or (mig_enabled and labels.get(MIG_STRATEGY_LABEL) == "single")
    if shared and labels.get(COUNT_LABEL):
        capacity = _int(labels[COUNT_LABEL])
        allocatable = capacity
    product = labels.get(PRODUCT_LABEL, "")
    memory = _int(labels.get(MEMORY_LABEL, "0")) or podinfo.catalog_memory(product)
    uid = meta.get("uid") or meta["name"]
    gpus = [
        GpuInfo(
            index=i,
            uuid=f"{uid}/gpu{i}",
            model=product or "unknown",
            memory_mib=memory,
            health="healthy" if i < allocatable else "unhealthy",
            health_reason="" if i < allocatable else "not allocatable: the device plugin reports it unhealthy",
            mig_enabled=mig_enabled,
        )
        for i in range(capacity)
    ]
    _allocate(gpus[:allocatable], pods, replicas)
    state, reason = node_state(node)
    annotations = meta.get("annotations") or {}
    if spec.get("unschedulable") and not reason:
        who = annotations.get(CORDON_BY)
        reason = f"cordoned by {who}: {annotations.get(CORDON_REASON, '')}".rstrip(": ") if who else "cordoned"
    purpose = labels.get(POOL_PURPOSE_LABEL, "")
    return NodeInfo(
        name=meta["name"],
        state=state,
        state_reason=reason,
        unschedulable=bool(spec.get("unschedulable")),
        labels=dict(labels),
        taints=[
            Taint(t.get("key", ""), t.get("value", "") or "", t.get("effect", "NoSchedule"))
            for t in spec.get("taints") or []
        ],
        pool=next((labels[k] for k in settings.pool_labels if labels.get(k)), ""),
        pool_purpose=purpose if purpose in PURPOSES else "",
        rack=labels.get(settings.rack_label, ""),
        leaf_switch=labels.get(settings.leaf_label, ""),
        nvlink_domain=labels.get(settings.nvlink_label, ""),
        gpu_model=product,
        gpu_allocatable=allocatable,
        cpu_cores=_cores(str((status.get("allocatable") or {}).get("cpu", "0"))),
        memory_mib=_quantity_mib(str((status.get("allocatable") or {}).get("memory", "0"))),
        gpus=gpus,
        extended_resources=extended_resources(status.get("allocatable") or {}),
    )


def _allocate(gpus: list[GpuInfo], pods: NodePods | None, replicas: int = 1) -> None:
    """Whole GPUs to pods in creation order, shares onto the first GPU with room (see the module note).

    On a time-sliced or MPS node (`replicas` per GPU) each requested nvidia.com/gpu is one replica: 1/replicas.
    """
    if pods is None:
        return
    free = list(gpus)
    for holder in pods.holders:
        if replicas > 1:
            holder = _Holder(holder.workload, 0, holder.fraction + holder.whole / replicas)
        for _ in range(holder.whole):
            gpu = next((g for g in free if g.allocated_fraction == 0.0), None)
            if gpu is None:
                break
            gpu.allocated_fraction = 1.0
            gpu.allocated_to.append(holder.workload)
            free.remove(gpu)
        if holder.fraction:
            gpu = next((g for g in free if g.allocated_fraction + holder.fraction <= 1.0 + 1e-9), None)
            if gpu is not None:
                gpu.allocated_fraction = min(1.0, gpu.allocated_fraction + holder.fraction)
                if holder.workload not in gpu.allocated_to:
                    gpu.allocated_to.append(holder.workload)
