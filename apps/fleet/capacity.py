"""Capacity and fragmentation per GPU model, from node-level counts grouped in SQL (never a row per GPU).

Free GPUs are only useful if a workload's shape fits them: 16 free H100s spread one or two per
node cannot run a 2 × 8 gang. So next to the totals we report whole free nodes and the largest
gang of whole nodes that fits inside one leaf switch (the topology large training jobs ask for),
and how many free GPUs are stranded on partly used nodes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, F, Max, Q, Sum, Value
from django.db.models.functions import Greatest
from django.utils.translation import gettext

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
            return gettext("%(nodes)s × %(gpus)s GPUs within one leaf switch") % {
                "nodes": self.largest_gang_leaf,
                "gpus": self.gpus_per_node,
            }
        if self.largest_free_on_one_node:
            return gettext("%(gpus)s GPUs on one node") % {"gpus": self.largest_free_on_one_node}
        return gettext("nothing fits")

    @property
    def fragmentation(self) -> float:
        """Share of free GPUs stranded on partly used nodes (0: all free GPUs are whole nodes)."""
        return round(self.stranded / self.free, 3) if self.free else 0.0


def capacity_by_model(nodes=None, cluster=None, node_sets: dict | None = None) -> list[ModelCapacity]:
    """Per-model capacity of `nodes` (a Node queryset, default all), from one grouped query.

    Nodes are grouped in SQL by cluster, model, leaf switch and size (a few hundred groups for 1,280
    nodes), with the free, whole-free and stranded counts summed per group; the groups are folded into
    models here. The most common node size wins ties towards the larger size. `node_sets`, when given, is
    filled with each cluster's (nodes, sum of their ids, sum of their squared ids), counted in the same
    statement: what tells the overview whether a cluster's stored heatmap cells still hold
    (`apps/health/heatmap.py`).
    """
    qs = nodes if nodes is not None else Node.objects.all()
    if cluster is not None:
        qs = qs.filter(cluster=cluster)
    out_of_service = Q(unschedulable=True) | ~Q(state=NodeState.READY)
    in_service = ~out_of_service
    # What new work could use on a node: allocatable (unhealthy GPUs are left out) minus allocated.
    free = Greatest(F("gpu_allocatable") - F("gpu_allocated"), Value(0))
    whole = in_service & Q(gpu_allocatable=F("gpu_count") + F("gpu_allocated"))  # free == count
    rows = (
        qs.exclude(state=NodeState.VANISHED)
        .filter(gpu_count__gt=0)
        .order_by()
        .values("cluster_id", "gpu_model_id", "gpu_model__name", "leaf_switch", "gpu_count")
        .annotate(
            n=Count("id"),
            total=Sum("gpu_count"),
            allocatable=Sum("gpu_allocatable"),
            allocated=Sum("gpu_allocated"),
            unhealthy=Sum("gpu_unhealthy"),
            cordoned=Sum("gpu_count", filter=out_of_service, default=0),
            free=Sum(free, filter=in_service, default=0),
            max_free=Max(free, filter=in_service, default=0),
            whole=Count("id", filter=whole),
            stranded=Sum(free, filter=in_service & ~whole, default=0),
            **({"id_sum": Sum("id"), "id_sq": Sum(F("id") * F("id"))} if node_sets is not None else {}),
        )
    )
    by_model: dict[int | None, ModelCapacity] = {}
    # Whole free nodes per (cluster, leaf switch): two clusters' switches may share a name, never a gang.
    leaf_whole: dict[int | None, Counter] = defaultdict(Counter)
    for row in rows:
        model_id = row["gpu_model_id"]
        cap = by_model.get(model_id)
        if cap is None:
            name = row["gpu_model__name"] or "unknown"
            cap = by_model[model_id] = ModelCapacity(gpu_model=name, gpu_model_id=model_id)
        cap.nodes += row["n"]
        cap.total += row["total"]
        cap.allocatable += row["allocatable"]
        cap.allocated += row["allocated"]
        cap.unhealthy += row["unhealthy"]
        cap.cordoned += row["cordoned"]
        cap.free += row["free"]
        cap.stranded += row["stranded"]
        cap.whole_free_nodes += row["whole"]
        cap.largest_free_on_one_node = max(cap.largest_free_on_one_node, row["max_free"])
        cap._sizes[row["gpu_count"]] += row["n"]
        if row["whole"]:
            leaf_whole[model_id][(row["cluster_id"], row["leaf_switch"] or "(none)")] += row["whole"]
        if node_sets is not None:
            n, id_sum, id_sq = node_sets.get(row["cluster_id"], (0, 0, 0))
            node_sets[row["cluster_id"]] = (n + row["n"], id_sum + row["id_sum"], id_sq + row["id_sq"])
    for model_id, cap in by_model.items():
        cap.gpus_per_node = max(cap._sizes.items(), key=lambda item: (item[1], item[0]))[0]
        if leaf_whole[model_id]:
            (_cluster, leaf), count = max(leaf_whole[model_id].items(), key=lambda item: (item[1], item[0]))
            cap.largest_gang_leaf, cap.largest_gang_leaf_switch = count, leaf
    return sorted(by_model.values(), key=lambda c: c.gpu_model)
