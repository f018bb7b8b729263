"""Topology levels and Kueue's Topology Aware Scheduling (TAS) objects, for a cluster whose `topology_scheduler`
is kueue-tas (docs/targets.md).

Kueue places a pod set within one domain of a Topology's level when its ResourceFlavor names that Topology
(`spec.topologyName`) and its pod template asks for the level (`kueue.x-k8s.io/podset-required-topology`); a
pod set of such a flavor without a request is unconstrained. A TAS flavor's nodes are the nodes matching its node
labels that carry every level's label: a node missing one is left out of the flavor altogether
(https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/, KEP-2724). So each GPU model gets its own
Topology, named after the model's code like its whole-GPU flavor, with the levels every node of that pool
carries, from the coarsest (rack) through the leaf switch and the NVLink domain to `kubernetes.io/hostname`,
the lowest level (the only place Kueue accepts it, and what lets it name each pod's node).

Only the whole-GPU pool (MIG instances included) is a TAS flavor: HAMi's vGPU memory and cores are not node
resources Kueue's placement could count, and time-sliced pools hold no gangs.
"""

from __future__ import annotations

from apps.backends.render.desired import GpuModelRef, NodeRef, QuotaSettings
from apps.backends.render.objects import PRODUCT_LABEL, meta, obj

API = "kueue.x-k8s.io/v1beta2"
HOSTNAME = "kubernetes.io/hostname"
TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TAS_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"


def _whole_pool_nodes(model: GpuModelRef, nodes: tuple[NodeRef, ...], settings: QuotaSettings) -> list[NodeRef]:
    """The nodes of the model's whole-GPU pool, as pools.model_pools finds them (not its HAMi nodes)."""
    hami = tuple(settings.hami_node_labels) if isinstance(settings.hami_node_labels, tuple) else ()
    return [
        node
        for node in nodes
        if node.labels.get(PRODUCT_LABEL) == model.product_label
        and not (hami and all(node.labels.get(k) == v for k, v in hami))
    ]


def tas_levels(model: GpuModelRef, nodes: tuple[NodeRef, ...], settings: QuotaSettings) -> tuple[str, ...]:
    """The node labels of the model's Topology, coarsest first: each level of the cluster's topology labels that
    every node of the model's whole-GPU pool carries, then the hostname. Without such nodes, only the hostname."""
    members = _whole_pool_nodes(model, nodes, settings)
    out: list[str] = []
    for _level, label in settings.topology_levels:
        if members and label not in out and label != HOSTNAME and all(label in n.labels for n in members):
            out.append(label)
    return (*out, HOSTNAME)


def topology_object(name: str, levels: tuple[str, ...]) -> dict:
    """Kueue's Topology: its levels' node labels, coarsest first."""
    return obj(API, "Topology", meta(name), spec={"levels": [{"nodeLabel": label} for label in levels]})
