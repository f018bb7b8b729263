"""Kueue's Topology Aware Scheduling (TAS), for the Kueue model (kueue.py).

Written from Kueue's documentation: the concept page
(https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/, site/content/en/docs/concepts/
topology_aware_scheduling.md), the user task (https://kueue.sigs.k8s.io/docs/tasks/run/topology_aware_scheduling/)
and the design, KEP-2724 (keps/2724-topology-aware-scheduling/README.md), with the words Kueue uses for its
refusals as its flavor assigner and TAS snapshot state them (pkg/scheduler/flavorassigner/tas_flavorassigner.go,
pkg/cache/scheduler/tas_flavor_snapshot.go):

- A ResourceFlavor with `spec.topologyName` is a TAS flavor; its `Topology` lists node labels from the coarsest
  level to the finest. A TAS flavor's nodes are the Ready, schedulable nodes matching its `nodeLabels` that carry
  every level's label (NodeMatchesFlavor); a node's hostname domain is its `kubernetes.io/hostname` label.
- A ClusterQueue with a TAS flavor whose Topology does not exist is inactive: `Can't admit new workloads: there is
  no Topology "<t>" for TAS flavor "<f>".` (reason TopologyNotFound).
- A pod set asks for TAS with one pod-template annotation: `kueue.x-k8s.io/podset-required-topology: <level>`
  (all pods in one domain of that level), `podset-preferred-topology: <level>` (that level, else the next one up,
  else spread), or `podset-unconstrained-topology: "true"` (anywhere with room). In a ClusterQueue whose flavors
  are all TAS flavors, a pod set without an annotation is treated as unconstrained ("implicit defaulting").
- Flavor matching, per flavor, before quota: a pod set that uses TAS skips a flavor without a topologyName
  (`Flavor "<f>" does not support TopologyAwareScheduling`) and one whose Topology lacks the requested level
  (`Flavor "<f>" does not contain the requested level`); a pod set that does not use TAS skips a TAS flavor
  (`Flavor "<f>" supports only TopologyAwareScheduling`).
- Placement, after quota fits: each node's free capacity is its allocatable minus the usage of the admitted TAS
  workloads' assignments and of the pods bound there that are not TAS pods. Required: the tightest domain of the
  level that holds every pod (BestFit); preferred: the same, going up a level at a time, else spread; unconstrained:
  nodes from the least free capacity up (LeastFreeCapacity). Inside a domain the pods go to its children from the
  most free capacity down, the last child chosen as the tightest fit. When no placement exists the pod set is not
  admitted: `topology "<t>" doesn't allow to fit any of <n> pod(s)` or `topology "<t>" allows to fit only <k> out
  of <n> pod(s)`, then `. Total nodes: <m>; excluded: resource "<r>": <count>` for nodes without room for one pod.
- The assignment (`podSetAssignments[].topologyAssignment`, v1beta2 form: `levels` and `slices`) names domains of
  the lowest level (only `kubernetes.io/hostname` when that is the lowest level) and their pod counts. The pods get
  the `kueue.x-k8s.io/topology` scheduling gate; Kueue's topology ungater removes it pod by pod, adding the node
  selector of the pod's domain.

Simplified: slices (`podset-slice-*`), pod-set groups, balanced placement, node hot swap, DRA and the
`Total nodes` detail for reasons other than resources (taints are excluded silently) are not modelled; the
pod-to-domain order follows the pods' names (Kueue ranks Indexed Job pods by their completion index, which the
names carry).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from tests.backends.k8s_fake import podspec, quantity
from tests.backends.k8s_fake.scheduler import is_bound, ready

HOSTNAME = "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"


@dataclass(frozen=True)
class TopologyRequest:
    mode: str  # "required" | "preferred" | "unconstrained"
    level: str = ""


def request_of(podset: dict) -> TopologyRequest | None:
    """The pod set's explicit TAS request, from its template's annotations."""
    annotations = (podset["template"].get("metadata") or {}).get("annotations") or {}
    if annotations.get(REQUIRED):
        return TopologyRequest("required", annotations[REQUIRED])
    if annotations.get(PREFERRED):
        return TopologyRequest("preferred", annotations[PREFERRED])
    if str(annotations.get(UNCONSTRAINED, "")).lower() == "true":
        return TopologyRequest("unconstrained")
    return None


def levels_of(topology: dict | None) -> list[str]:
    return [level["nodeLabel"] for level in ((topology or {}).get("spec") or {}).get("levels") or []]


def hostname(node: dict) -> str:
    return (node["metadata"].get("labels") or {}).get(HOSTNAME) or node["metadata"]["name"]


@dataclass
class Domain:
    values: tuple[str, ...]  # the level values from the top down to this domain
    capacity: int  # pods it can take
    children: list[Domain]
    node: str = ""  # a leaf of the tree: the node's name


@dataclass
class Placement:
    """Where a pod set goes: pods per lowest-level domain, and the nodes behind each domain."""

    levels: list[str]  # the assignment's levels (only the hostname when it is the lowest level)
    domains: list[tuple[tuple[str, ...], int]]  # (values per assignment level, pods)
    nodes: dict[str, int]  # node name -> pods, for the capacity bookkeeping


class Tas:
    """TAS over the model's store; `plane` is the control plane (cluster.py)."""

    def __init__(self, plane):
        self.plane = plane

    def topology(self, name: str) -> dict | None:
        resource = self.plane.resource("kueue.x-k8s.io", "v1beta2", "topologies")
        return self.plane.store.bucket(resource).get(("", name)) if resource else None

    def missing_topologies(self, cq: dict, flavors: dict[str, dict]) -> list[tuple[str, str]]:
        """(topology, flavor) for each TAS flavor of the ClusterQueue whose Topology does not exist."""
        out = []
        for group in (cq.get("spec") or {}).get("resourceGroups") or []:
            for ref in group.get("flavors") or []:
                name = ((flavors.get(ref["name"]) or {}).get("spec") or {}).get("topologyName")
                if name and self.topology(name) is None:
                    out.append((name, ref["name"]))
        return out

    @staticmethod
    def tas_only(cq: dict, flavors: dict[str, dict]) -> bool:
        names = [f["name"] for g in (cq.get("spec") or {}).get("resourceGroups") or [] for f in g.get("flavors") or []]
        return bool(names) and all(((flavors.get(n) or {}).get("spec") or {}).get("topologyName") for n in names)

    def flavor_problem(self, podset: dict, flavor: dict, tas_only: bool) -> str:
        """Why a pod set cannot use this flavor for TAS reasons ("" when it can), in Kueue's words."""
        request = request_of(podset)
        name = flavor["metadata"]["name"]
        topology_name = (flavor.get("spec") or {}).get("topologyName")
        if request is not None or tas_only:
            if not topology_name:
                return f'Flavor "{name}" does not support TopologyAwareScheduling'
            topology = self.topology(topology_name)
            if topology is None:
                return f'Flavor "{name}" information missing in TAS cache'
            if request is not None and request.level and request.level not in levels_of(topology):
                return f'Flavor "{name}" does not contain the requested level'
            return ""
        if topology_name:
            return f'Flavor "{name}" supports only TopologyAwareScheduling'
        return ""

    # --- capacity -------------------------------------------------------------------------------------------

    def _tas_usage(self, admitted: list[dict]) -> tuple[dict[str, podspec.Requests], set[str]]:
        """Per node, what admitted TAS workloads' assignments use; and the uids whose pods are TAS pods."""
        usage: dict[str, podspec.Requests] = {}
        owners: set[str] = set()
        by_host = {hostname(n): n["metadata"]["name"] for n in self.plane.store.all("", "nodes")}
        for wl in admitted:
            podsets = {p["name"]: p for p in wl["spec"]["podSets"]}
            for assignment in wl["status"]["admission"].get("podSetAssignments") or []:
                topology = assignment.get("topologyAssignment")
                if not topology:
                    continue
                owners.add((wl["metadata"].get("annotations") or {}).get("fake.kueue/owner", "/").split("/")[0])
                per_pod = podspec.pod_requests(podsets[assignment["name"]]["template"].get("spec") or {})
                for node, pods in self.decode_nodes(topology, by_host).items():
                    podspec.add(usage.setdefault(node, {}), per_pod, times=pods)
        return usage, owners

    def decode_nodes(self, topology: dict, by_host: dict[str, str] | None = None) -> dict[str, int]:
        """Pods per node of an assignment (hostname-level assignments; a coarser lowest level spreads nowhere)."""
        levels = topology.get("levels") or []
        out: dict[str, int] = {}
        if levels != [HOSTNAME]:
            return out
        by_host = by_host or {hostname(n): n["metadata"]["name"] for n in self.plane.store.all("", "nodes")}
        for values, count in decode(topology):
            node = by_host.get(values[0])
            if node:
                out[node] = out.get(node, 0) + count
        return out

    def _free(self, flavor: dict, levels: list[str], admitted: list[dict], tolerations: list, extra: dict) -> dict:
        """Free resources of the flavor's TAS nodes: name -> (node, free)."""
        usage, tas_owners = self._tas_usage(admitted)
        labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
        taints_ok = [*tolerations, *((flavor.get("spec") or {}).get("tolerations") or [])]
        out = {}
        for node in sorted(self.plane.store.all("", "nodes"), key=lambda n: n["metadata"]["name"]):
            node_labels = node["metadata"].get("labels") or {}
            if (node.get("spec") or {}).get("unschedulable") or not ready(node):
                continue
            if any(node_labels.get(k) != v for k, v in labels.items()) or any(lv not in node_labels for lv in levels):
                continue
            if podspec.untolerated((node.get("spec") or {}).get("taints") or [], taints_ok) is not None:
                continue
            name = node["metadata"]["name"]
            status = node.get("status") or {}
            allocatable = {k: quantity.parse(v) for k, v in (status.get("allocatable") or {}).items()}
            used = podspec.add(dict(usage.get(name, {})), extra.get(name, {}))
            for pod in self.plane.store.all("", "pods"):
                if not is_bound(pod) or pod["spec"]["nodeName"] != name:
                    continue
                refs = {r.get("uid") for r in pod["metadata"].get("ownerReferences") or []}
                job_owners = {
                    r.get("uid")
                    for job in self.plane.store.all("batch", "jobs")
                    if job["metadata"]["uid"] in refs
                    for r in job["metadata"].get("ownerReferences") or []
                }
                if (refs | job_owners | {pod["metadata"]["uid"]}) & tas_owners:
                    continue  # a TAS pod: its workload's assignment counts it
                podspec.add(used, podspec.pod_requests(pod["spec"]))
            out[name] = (node, {k: v - used.get(k, Fraction(0)) for k, v in allocatable.items()})
        return out

    # --- placement ------------------------------------------------------------------------------------------

    def place(
        self, podset: dict, flavor: dict, tas_only: bool, admitted: list[dict], extra: dict | None = None
    ) -> tuple[Placement | None, str]:
        """Where Kueue puts the pod set on this TAS flavor, or why it cannot ("" and None: not a TAS pod set).
        `extra`: per node, what the workload's earlier pod sets take there."""
        request = request_of(podset)
        topology_name = (flavor.get("spec") or {}).get("topologyName")
        if not topology_name or (request is None and not tas_only):
            return None, ""
        levels = levels_of(self.topology(topology_name))
        request = request or TopologyRequest("unconstrained")
        spec = podset["template"].get("spec") or {}
        per_pod = podspec.pod_requests(spec)
        count = podset["count"]
        free = self._free(flavor, levels, admitted, spec.get("tolerations") or [], extra or {})
        capacity: dict[str, int] = {}
        excluded: dict[str, int] = {}
        for name, (_node, left) in free.items():
            fits = [(left.get(r, Fraction(0)) // a, r) for r, a in sorted(per_pod.items()) if a]
            capacity[name] = max(min((int(f) for f, _ in fits), default=count), 0)
            if capacity[name] == 0 and fits:
                short = next((r for f, r in fits if f < 1), fits[0][1])
                excluded[f'resource "{short}"'] = excluded.get(f'resource "{short}"', 0) + 1
        nodes = {name: node for name, (node, _) in free.items()}
        root = _tree(nodes, capacity, levels)
        if request.mode == "unconstrained":
            chosen = _least_free(root, count)
            fit = min(root.capacity, count)
        else:
            index = levels.index(request.level)
            chosen, fit = None, 0
            for depth in range(index, -1, -1):
                domains = [d for d in _at_depth(root, depth + 1) if d.capacity >= count]
                fit = max(fit, max((d.capacity for d in _at_depth(root, depth + 1)), default=0))
                if domains:
                    tightest = min(domains, key=lambda d: (d.capacity, d.values))
                    chosen = _best_fit(tightest, count)
                    break
                if request.mode == "required":
                    break
            if chosen is None and request.mode == "preferred" and root.capacity >= count:
                chosen = _best_fit(root, count)
            fit = min(fit, count)
        if chosen is None:
            verb = f"doesn't allow to fit any of {count} pod(s)"
            if fit:
                verb = f"allows to fit only {fit} out of {count} pod(s)"
            text = f'topology "{topology_name}" {verb}'
            if excluded:
                text += f". Total nodes: {len(free)}; excluded: " + ", ".join(
                    f"{k}: {v}" for k, v in sorted(excluded.items())
                )
            return None, text
        assignment_levels = [HOSTNAME] if levels and levels[-1] == HOSTNAME else levels
        domains = []
        for node_name, pods in sorted(chosen.items(), key=lambda item: _values(nodes[item[0]], levels)):
            values = _values(nodes[node_name], levels)
            domains.append(((values[-1],) if assignment_levels == [HOSTNAME] else values, pods))
        merged: dict[tuple[str, ...], int] = {}
        for values, pods in domains:
            merged[values] = merged.get(values, 0) + pods
        return Placement(assignment_levels, list(merged.items()), chosen), ""


def _values(node: dict, levels: list[str]) -> tuple[str, ...]:
    labels = node["metadata"].get("labels") or {}
    return tuple(hostname(node) if level == HOSTNAME else labels[level] for level in levels)


def _tree(nodes: dict[str, dict], capacity: dict[str, int], levels: list[str]) -> Domain:
    """The domains of the flavor's nodes, level by level; a domain is known by the values of every level above."""
    root = Domain((), 0, [])
    index: dict[tuple[str, ...], Domain] = {(): root}
    for name, node in nodes.items():
        values = _values(node, levels)
        parent = root
        for depth in range(1, len(values) + 1):
            key = values[:depth]
            if key not in index:
                index[key] = Domain(key, 0, [])
                parent.children.append(index[key])
            parent = index[key]
        parent.children.append(Domain((*values, name), capacity[name], [], node=name))
    _sum(root)
    return root


def _sum(domain: Domain) -> int:
    if domain.children:
        domain.capacity = sum(_sum(child) for child in domain.children)
    return domain.capacity


def _at_depth(domain: Domain, depth: int) -> list[Domain]:
    if depth == 0:
        return [domain]
    return [d for child in domain.children if not child.node for d in _at_depth(child, depth - 1)]


def _best_fit(domain: Domain, count: int) -> dict[str, int]:
    """BestFit inside a domain: its children from the most free capacity down, the last one the tightest fit."""
    if domain.node:
        return {domain.node: count}
    out: dict[str, int] = {}
    left = count
    children = sorted(domain.children, key=lambda d: (-d.capacity, d.values))
    while left > 0:
        fitting = [d for d in children if d.capacity >= left]
        child = min(fitting, key=lambda d: (d.capacity, d.values)) if fitting else children[0]
        children.remove(child)
        take = min(child.capacity, left)
        if take <= 0:
            break
        for node, pods in _best_fit(child, take).items():
            out[node] = out.get(node, 0) + pods
        left -= take
    return out


def _least_free(root: Domain, count: int) -> dict[str, int] | None:
    """LeastFreeCapacity over the nodes: from the one with the least room up, as many pods as each holds."""
    if root.capacity < count:
        return None
    leaves = sorted(_leaves(root), key=lambda d: (d.capacity, d.values))
    out: dict[str, int] = {}
    left = count
    for leaf in leaves:
        if left <= 0:
            break
        take = min(leaf.capacity, left)
        if take:
            out[leaf.node] = take
            left -= take
    return out


def _leaves(domain: Domain) -> list[Domain]:
    return [domain] if domain.node else [leaf for child in domain.children for leaf in _leaves(child)]


def encode(placement: Placement) -> dict:
    """The v1beta2 TopologyAssignment: the levels, and one slice listing each domain's values and pod count."""
    return {
        "levels": placement.levels,
        "slices": [
            {
                "domainCount": len(placement.domains),
                "valuesPerLevel": [
                    {"individual": {"roots": [values[i] for values, _ in placement.domains]}}
                    for i in range(len(placement.levels))
                ],
                "podCounts": {"individual": [pods for _, pods in placement.domains]},
            }
        ],
    }


def decode(topology: dict) -> list[tuple[tuple[str, ...], int]]:
    """(values per level, pods) of each domain of an assignment `encode` wrote (prefix / suffix / universal
    forms included)."""
    out = []
    for piece in topology.get("slices") or []:
        n = piece.get("domainCount", 0)
        columns = []
        for level in piece.get("valuesPerLevel") or []:
            if "universal" in level:
                columns.append([level["universal"]] * n)
            else:
                ind = level.get("individual") or {}
                columns.append([f"{ind.get('prefix', '')}{r}{ind.get('suffix', '')}" for r in ind.get("roots") or []])
        counts = piece.get("podCounts") or {}
        pods = [counts["universal"]] * n if "universal" in counts else list(counts.get("individual") or [])
        for i in range(n):
            out.append((tuple(column[i] for column in columns), pods[i]))
    return out


def domain_selectors(topology: dict) -> list[tuple[dict[str, str], int]]:
    """(node selector, pods) per domain: what the ungater gives the pods of each domain."""
    levels = topology.get("levels") or []
    return [(dict(zip(levels, values, strict=True)), pods) for values, pods in decode(topology)]
