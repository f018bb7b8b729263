"""GPU pools: the groups of nodes a workload of one sharing mode lands on, found from the inventory's labels.

Both queueing systems quota per pool. Kueue gets a ResourceFlavor per pool (its nodeLabels are the pool's
labels, so a pod's node selector picks its pool's flavor), Volcano a top-level queue per pool (volcano.py).
The labels are those GPU Feature Discovery and the NVIDIA device plugin put on nodes, and HAMi's chart:

* whole, named after the model code ("a100"): nodes whose nvidia.com/gpu.product is the model's product label.
  Pods request nvidia.com/gpu. With the device plugin's mixed MIG strategy the same nodes advertise MIG
  instances as nvidia.com/mig-<profile> (GFD labels them nvidia.com/mig-<profile>.count; the product label
  stays the GPU's), so a pool's MIG resources are the profiles its nodes carry such labels for.
  https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html
* time-slice, "<code>-shared-<N>", and MPS, "<code>-mps-<N>" (the replicated pools): with sharing.timeSlicing
  or sharing.mps and renameByDefault false (the default) GFD labels a node's product "<product>-SHARED",
  nvidia.com/gpu.replicas N and nvidia.com/gpu.sharing-strategy "time-slicing" or "mps", and the node
  advertises N nvidia.com/gpu per GPU. One pool per strategy and N, since pods select their replica count and
  strategy: the two strategies' nodes differ only in the strategy label, so the pool's labels carry it and a
  time-sliced pod never lands on (or is counted in the flavor of) an MPS node. A shared node without the
  label (a device plugin before v0.15, which had no MPS) is in no pool: the pods' node selector names it.
  https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html,
  https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing-mps.html
* HAMi, "<code>-hami" (Kueue only; on Volcano HAMi runs as Volcano's vGPU resources in the whole pool): the
  nodes with the product label and the cluster's `hami_node_labels` (the labels HAMi's device plugin runs on, its
  chart's devicePlugin.nvidiaNodeSelector, default gpu=on). Each GPU is `hami_split_count` vGPUs of
  nvidia.com/gpu, its memory in MiB of nvidia.com/gpumem and 100 nvidia.com/gpucores.
  https://github.com/Project-HAMi/HAMi (README: resources; chart values: nvidiaNodeSelector, deviceSplitCount)

A queue's quota of a model becomes, in each pool of the model, its GPUs times the pool's units per GPU of
each resource (`units`). cpu and memory come with a GPU in the proportion the pool's nodes have them
(allocatable cores and memory over their GPUs), or CPU_PER_GPU and MEMORY_GIB_PER_GPU when the inventory has
no such node (the per-pod defaults of a whole GPU in the workload renderer). Every pool of a model gets the
queue's whole quota in its own units: the queueing system then never refuses what the console's admission,
which counts GPU fractions against the one guarantee, has admitted; the console stays authoritative.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from apps.backends.render.desired import DesiredState, GpuModelRef, NodeRef, QuotaSettings
from apps.backends.render.errors import RenderError
from apps.backends.render.names import is_label_value, is_qualified_name
from apps.backends.render.objects import GPU_RESOURCE, PRODUCT_LABEL

WHOLE, TIME_SLICE, MPS, HAMI = "whole", "time-slice", "mps", "hami"
CPU_PER_GPU = 8  # cores that come with a whole GPU without inventory (common.cpu_memory's default)
MEMORY_GIB_PER_GPU = 64
SHARED_SUFFIX = "-SHARED"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
# The replicated pool kinds and the device plugin's sharing strategy each is labelled with (its SharingStrategy:
# https://github.com/NVIDIA/k8s-device-plugin/blob/main/api/config/v1/sharing.go).
STRATEGIES = {TIME_SLICE: "time-slicing", MPS: "mps"}
_KIND_OF_STRATEGY = {strategy: kind for kind, strategy in STRATEGIES.items()}
_POOL_SUFFIX = {TIME_SLICE: "shared", MPS: "mps"}
COUNT_LABEL = "nvidia.com/gpu.count"
MIG_PREFIX = "nvidia.com/mig-"
HAMI_MEMORY = "nvidia.com/gpumem"  # MiB of device memory per vGPU
HAMI_CORES = "nvidia.com/gpucores"  # percent of a GPU's compute
VGPU_NUMBER = "volcano.sh/vgpu-number"  # Volcano's vGPU device plugin (a HAMi fork): vGPUs
VGPU_MEMORY = "volcano.sh/vgpu-memory"  # MiB
VGPU_CORES = "volcano.sh/vgpu-cores"  # percent
MIG_COMPUTE_SLICES = 7
_MIG_COUNT = re.compile(r"nvidia\.com/mig-(.+)\.count")
_MIG_PROFILE = re.compile(r"(\d+)g\.(\d+)gb")


def mig_resource(profile: str) -> str:
    return f"{MIG_PREFIX}{profile}"


def mig_per_gpu(profile: str, memory_mib: int) -> int:
    """The most instances of `profile` one GPU holds: 7 compute slices, and its memory (e.g. 1g.10gb: 7, 1g.20gb
    on an 80 GB GPU: 4, 3g.40gb: 2). Unknown forms count 1."""
    match = _MIG_PROFILE.fullmatch(profile)
    if not match:
        return 1
    compute, memory_gb = int(match[1]), int(match[2])
    per_gpu = MIG_COMPUTE_SLICES // max(compute, 1)
    if memory_mib and memory_gb:
        per_gpu = min(per_gpu, round(memory_mib / 1024) // memory_gb)
    return max(per_gpu, 1)


@dataclass(frozen=True)
class Pool:
    """One pool of one GPU model and what its nodes add up to."""

    model: GpuModelRef
    kind: str  # WHOLE | TIME_SLICE | MPS | HAMI
    node_labels: tuple[tuple[str, str], ...]
    replicas: int = 1  # time-slice and MPS: nvidia.com/gpu per GPU
    nodes: int = 0
    gpus: int = 0  # physical GPUs of its nodes
    cpu_cores: int = 0
    memory_mib: int = 0
    mig_profiles: tuple[str, ...] = ()  # whole pools: MIG profiles (mixed strategy) its nodes advertise

    @property
    def name(self) -> str:
        """The ResourceFlavor (Kueue) or top-level queue (Volcano) of the pool."""
        return pool_name(self.model.code, self.kind, self.replicas)

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.node_labels)

    def cpu_millis_per_gpu(self) -> int:
        if self.gpus and self.cpu_cores:
            return math.ceil(self.cpu_cores * 1000 / self.gpus)
        return CPU_PER_GPU * 1000

    def memory_mib_per_gpu(self) -> int:
        if self.gpus and self.memory_mib:
            return math.ceil(self.memory_mib / self.gpus)
        return MEMORY_GIB_PER_GPU * 1024

    def resources(self, settings: QuotaSettings, gpu_resource: str = GPU_RESOURCE, *, volcano: bool = False) -> list:
        """The resources a workload in this pool requests, each with its units per GPU of quota."""
        out = [("cpu", self.cpu_millis_per_gpu()), ("memory", self.memory_mib_per_gpu())]
        if self.kind == HAMI:
            out += [
                (gpu_resource, settings.hami_split_count),
                (HAMI_MEMORY, self.model.memory_mib),
                (HAMI_CORES, 100),
            ]
        else:
            out.append((gpu_resource, self.replicas))
        if volcano and self.kind == WHOLE and settings.volcano_vgpu:
            out += [
                (VGPU_NUMBER, settings.hami_split_count),
                (VGPU_MEMORY, self.model.memory_mib),
                (VGPU_CORES, 100),
            ]
        out += [(mig_resource(p), mig_per_gpu(p, self.model.memory_mib)) for p in self.mig_profiles]
        return out


def pool_name(code: str, kind: str = WHOLE, replicas: int | None = 1) -> str:
    """The pool a workload of model `code` and this sharing mode uses (the name both sides derive)."""
    if kind in _POOL_SUFFIX:
        return f"{replicated_prefix(code, kind)}{replicas}"
    if kind == HAMI:
        return f"{code}-hami"
    return code


def replicated_prefix(code: str, kind: str) -> str:
    """What the names of the model's time-slice (or MPS) pools begin with, their replica count after it."""
    return f"{code}-{_POOL_SUFFIX[kind]}-"


def check_settings(settings: QuotaSettings) -> None:
    """RenderError naming the connection setting that cannot be used."""
    excluded = settings.kueue_excluded_resources
    if not isinstance(excluded, tuple) or not all(isinstance(p, str) and p for p in excluded):
        raise RenderError("kueue_excluded_resources", f"{excluded!r} is not a list of resource name prefixes")
    for prefix in excluded:
        if GPU_RESOURCE.startswith(prefix):
            raise RenderError(
                "kueue_excluded_resources",
                f"{prefix!r} excludes {GPU_RESOURCE}, the resource the console's quotas are in; Kueue would "
                "admit every GPU workload without quota",
            )
    labels = settings.hami_node_labels
    if not isinstance(labels, tuple) or not all(
        isinstance(pair, tuple)
        and len(pair) == 2
        and isinstance(pair[0], str)
        and isinstance(pair[1], str)
        and is_qualified_name(pair[0])
        and is_label_value(pair[1])
        for pair in labels
    ):
        raise RenderError("hami_node_labels", f"{labels!r} is not a map of node label keys to label values")
    count = settings.hami_split_count
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1024:
        raise RenderError("hami_split_count", f"{count!r} is not a whole number of vGPUs per GPU (1-1024)")
    if settings.topology_scheduler not in ("console", "kueue-tas", "volcano-hypernodes"):
        raise RenderError(
            "topology_scheduler",
            f"{settings.topology_scheduler!r} is not one of console, kueue-tas, volcano-hypernodes",
        )


def _physical_gpus(node: NodeRef) -> int:
    """GFD's count label is the physical GPUs whatever the sharing (replicas and vGPUs multiply the resource)."""
    try:
        return int(node.labels.get(COUNT_LABEL, "")) or node.gpus
    except ValueError:
        return node.gpus


def _replicas(node: NodeRef) -> int:
    try:
        return int(node.labels.get(REPLICAS_LABEL, ""))
    except ValueError:
        return 0


def replicated_labels(product: str, kind: str, replicas: int) -> tuple[tuple[str, str], ...]:
    """The labels of a replicated pool's nodes (and its pods' node selector): GFD's shared product, replicas and
    sharing strategy. `product` is the model's (unshared) product label."""
    shared = product if product.endswith(SHARED_SUFFIX) else product + SHARED_SUFFIX
    return ((PRODUCT_LABEL, shared), (REPLICAS_LABEL, str(replicas)), (STRATEGY_LABEL, STRATEGIES[kind]))


def _add(pool: Pool | None, base: Pool, node: NodeRef) -> Pool:
    pool = pool or base
    profiles = {
        m[1] for key in node.labels if (m := _MIG_COUNT.fullmatch(key)) and is_qualified_name(mig_resource(m[1]))
    }
    return Pool(
        model=pool.model,
        kind=pool.kind,
        node_labels=pool.node_labels,
        replicas=pool.replicas,
        nodes=pool.nodes + 1,
        gpus=pool.gpus + _physical_gpus(node),
        cpu_cores=pool.cpu_cores + node.cpu_cores,
        memory_mib=pool.memory_mib + node.memory_mib,
        mig_profiles=tuple(sorted(set(pool.mig_profiles) | (profiles if pool.kind == WHOLE else set()))),
    )


def model_pools(model: GpuModelRef, nodes: tuple[NodeRef, ...], settings: QuotaSettings) -> list[Pool]:
    """The pools of one model: whole (always, so a cluster not synced yet still has its GPU quota), and the
    time-slice and MPS pools (one per strategy and replica count) and HAMi pool its nodes show."""
    product = model.product_label
    hami_labels = tuple(settings.hami_node_labels)
    whole = Pool(model, WHOLE, ((PRODUCT_LABEL, product),))
    shared: dict[tuple[str, int], Pool] = {}
    hami = Pool(model, HAMI, ((PRODUCT_LABEL, product), *hami_labels)) if hami_labels else None
    found_hami = None
    found_whole = None
    for node in sorted(nodes, key=lambda n: n.name):
        label = node.labels.get(PRODUCT_LABEL, "")
        if label == product:
            if hami is not None and all(node.labels.get(k) == v for k, v in hami_labels):
                found_hami = _add(found_hami, hami, node)
            else:
                found_whole = _add(found_whole, whole, node)
        elif label == product + SHARED_SUFFIX and _replicas(node) > 1:
            kind = _KIND_OF_STRATEGY.get(node.labels.get(STRATEGY_LABEL, ""))
            if kind is None:
                continue
            n = _replicas(node)
            base = Pool(model, kind, replicated_labels(product, kind, n), replicas=n)
            shared[kind, n] = _add(shared.get((kind, n)), base, node)
    pools = [found_whole or whole]
    pools += [shared[key] for key in sorted(shared, key=lambda key: (key[0] == MPS, key[1]))]
    if found_hami is not None:
        pools.append(found_hami)
    return pools


def pools_of(state: DesiredState) -> dict[str, list[Pool]]:
    """Every model's pools on the cluster, models in the state's order."""
    check_settings(state.settings)
    return {model.code: model_pools(model, state.nodes, state.settings) for model in state.gpu_models}


def offered(model: GpuModelRef, nodes: tuple[NodeRef, ...], settings: QuotaSettings) -> tuple[str, ...]:
    """What a workload of `model` can use on the cluster: its pools' names and its nodes' MIG resources (the
    workload renderer refuses a shared GPU outside them; see RenderContext.gpu_pools). RenderError for settings
    that cannot work."""
    check_settings(settings)
    pools = model_pools(model, nodes, settings)
    return tuple([p.name for p in pools] + [mig_resource(m) for p in pools for m in p.mig_profiles])
