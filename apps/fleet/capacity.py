"""Capacity and fragmentation per GPU model, from node-level counts (one row per node, never per GPU).

Free GPUs are only useful if a workload's shape fits them: 16 free H100s spread one or two per
node cannot run a 2 × 8 gang. So next to the totals we report whole free nodes and the largest
gang of whole nodes that fits inside one leaf switch (the topology large training jobs ask for),
and how many free GPUs are stranded on partly used nodes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from apps.fleet.models import Node, NodeState


@dataclass
class ModelCapacity:
    gpu_model: str
    gpu_model_id: int | None
    nodes: int = 0
    total: int = 0
    allocatable: int = 0
    allocated: int = 0
    free: int = 0
    cordoned: int = 0  # GPUs on cordoned or not-ready nodes
    unhealthy: int = 0
    gpus_per_node: int = 0  # the most common node size
    whole_free_nodes: int = 0
    largest_gang_leaf: int = 0  # whole free nodes within one leaf switch
    largest_gang_leaf_switch: str = ""
    largest_free_on_one_node: int = 0
    stranded: int = 0  # free GPUs on nodes that are partly in use
    _sizes: Counter = field(default_factory=Counter, repr=False)

    @property
    def largest_gang_text(self) -> str:
        """e.g. "3 × 8 GPUs within one leaf switch" or "one node with 5 free GPUs"."""
        if self.largest_gang_leaf:
            return f"{self.largest_gang_leaf} × {self.gpus_per_node} GPUs within one leaf switch"
        if self.largest_free_on_one_node:
            return f"{self.largest_free_on_one_node} GPUs on one node"
        return "nothing fits"

    @property
    def fragmentation(self) -> float:
        """Share of free GPUs stranded on partly used nodes (0: all free GPUs are whole nodes)."""
        return round(self.stranded / self.free, 3) if self.free else 0.0


def capacity_by_model(nodes=None, cluster=None) -> list[ModelCapacity]:
    """Aggregate node counts into per-model capacity. `nodes` is a Node queryset (defaults to all)."""
    qs = nodes if nodes is not None else Node.objects.all()
    if cluster is not None:
        qs = qs.filter(cluster=cluster)
    rows = qs.exclude(state=NodeState.VANISHED).values_list(
        "cluster_id",
        "gpu_model_id",
        "gpu_model__name",
        "leaf_switch",
        "state",
        "unschedulable",
        "gpu_count",
        "gpu_allocatable",
        "gpu_allocated",
        "gpu_unhealthy",
    )
    by_model: dict[int | None, ModelCapacity] = {}
    # Whole free nodes per (cluster, leaf switch): two clusters' switches may share a name, never a gang.
    leaf_whole: dict[int | None, Counter] = defaultdict(Counter)
    for cluster_id, model_id, model_name, leaf, state, unschedulable, count, allocatable, allocated, unhealthy in rows:
        if count == 0:
            continue
        cap = by_model.get(model_id)
        if cap is None:
            cap = by_model[model_id] = ModelCapacity(gpu_model=model_name or "unknown", gpu_model_id=model_id)
        cap.nodes += 1
        cap.total += count
        cap.allocatable += allocatable
        cap.allocated += allocated
        cap.unhealthy += unhealthy
        cap._sizes[count] += 1
        if unschedulable or state != NodeState.READY:
            cap.cordoned += count
            continue
        free = max(allocatable - allocated, 0)  # allocatable already leaves unhealthy GPUs out
        cap.free += free
        cap.largest_free_on_one_node = max(cap.largest_free_on_one_node, free)
        if free == count:  # a whole node: every GPU healthy and free
            cap.whole_free_nodes += 1
            leaf_whole[model_id][(cluster_id, leaf or "(none)")] += 1
        else:
            cap.stranded += free
    for model_id, cap in by_model.items():
        cap.gpus_per_node = cap._sizes.most_common(1)[0][0]
        if leaf_whole[model_id]:
            (_cluster, leaf), count = max(leaf_whole[model_id].items(), key=lambda item: (item[1], item[0]))
            cap.largest_gang_leaf, cap.largest_gang_leaf_switch = count, leaf
    return sorted(by_model.values(), key=lambda c: c.gpu_model)
