"""Volcano's HyperNodes as the nodes' topology, for a cluster whose `topology_scheduler` is volcano-hypernodes.

A HyperNode (topology.volcano.sh/v1alpha1) is a network domain of one tier (1 the lowest): its members are nodes,
selected by `exactMatch` name, `regexMatch` pattern or `labelMatch` selector, or HyperNodes of a lower tier
named by `exactMatch` (https://volcano.sh/en/docs/network_topology_aware_scheduling/; the CRD in
/work/shared/crds/topology.volcano.sh_hypernodes.yaml). A Volcano Job with `networkTopology` mode hard and
`highestTierAllowed` T runs inside one HyperNode of tier T or below, so the console's leaf switch of a node is
the HyperNode of the leaf tier (`volcano_tiers.leaf`, default 2) that contains it, and its NVLink domain the
HyperNode of the NVLink tier (default 1): the domains the capacity page's largest gang counts are Volcano's.
"""

from __future__ import annotations

import hashlib
import re

GROUP_PATH = "/apis/topology.volcano.sh/v1alpha1/hypernodes"


def _matches(selector: dict, name: str, labels: dict[str, str]) -> bool:
    exact = (selector.get("exactMatch") or {}).get("name")
    if exact is not None:
        return exact == name
    regex = selector.get("regexMatch")
    if regex is not None:
        try:
            return re.fullmatch(regex.get("pattern", ""), name) is not None
        except re.error:
            return False
    label = selector.get("labelMatch")
    if label is not None:
        wanted = label.get("matchLabels") or {}
        return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())
    return False


def fingerprint(hypernodes: list[dict]) -> str:
    """What changes when a HyperNode is added, changed or removed (the inventory lists its nodes again then)."""
    pairs = sorted(f"{h['metadata']['name']}@{h['metadata'].get('resourceVersion', '')}" for h in hypernodes)
    return hashlib.sha256("\n".join(pairs).encode()).hexdigest()[:16]


class HyperNodes:
    """The cluster's HyperNodes, to place each node in them."""

    def __init__(self, hypernodes: list[dict]):
        self.by_name = {h["metadata"]["name"]: h for h in hypernodes}
        self.parent: dict[str, list[str]] = {}
        for name, h in self.by_name.items():
            for member in (h.get("spec") or {}).get("members") or []:
                child = ((member.get("selector") or {}).get("exactMatch") or {}).get("name")
                if member.get("type") == "HyperNode" and child:
                    self.parent.setdefault(child, []).append(name)

    def tier(self, name: str) -> int:
        try:
            return int((self.by_name[name].get("spec") or {}).get("tier", 1))
        except (TypeError, ValueError):
            return 0

    def containing(self, node: str, labels: dict[str, str]) -> set[str]:
        """Every HyperNode the node is in: those listing it, and their ancestors."""
        found = {
            name
            for name, h in self.by_name.items()
            for m in (h.get("spec") or {}).get("members") or []
            if m.get("type", "Node") == "Node" and _matches(m.get("selector") or {}, node, labels)
        }
        todo = list(found)
        while todo:
            for parent in self.parent.get(todo.pop(), []):
                if parent not in found:
                    found.add(parent)
                    todo.append(parent)
        return found

    def domain(self, node: str, labels: dict[str, str], tier: int) -> str:
        """The node's HyperNode of this tier ("" when none; the first by name if several claim it)."""
        return min((h for h in self.containing(node, labels) if self.tier(h) == tier), default="")
