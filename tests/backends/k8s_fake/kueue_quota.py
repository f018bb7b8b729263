"""Kueue's quota arithmetic: ClusterQueues and Cohorts as a tree of resource nodes, and flavor assignment.

Semantics from https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/ (resource groups, flavors tried in order,
borrowing, borrowingLimit, lendingLimit), https://kueue.sigs.k8s.io/docs/concepts/cohort/ (hierarchical cohorts:
a Cohort's own quota is an extra shared pool; a ClusterQueue borrows only [flavor, resource] pairs it lists) and
https://kueue.sigs.k8s.io/docs/concepts/resource_flavor/ (nodeLabels against the pod's node affinity, nodeTaints
against its tolerations). The arithmetic follows Kueue's pkg/cache resource_node.go: a node's subtree quota is its
nominal quota plus what its children lend (all but `nominal - lendingLimit`); what a ClusterQueue can still use is
its unlent local quota plus what its parent has available, capped by its borrowingLimit. The messages are the
flavor assigner's (pkg/scheduler/flavorassigner/flavorassigner.go).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from tests.backends.k8s_fake import podspec, quantity

FR = tuple[str, str]  # (flavor, resource)
NO_FIT, PREEMPT, FIT = 0, 1, 2


@dataclass
class Quota:
    nominal: Fraction
    borrowing: Fraction | None
    lending: Fraction | None


@dataclass
class ResourceGroup:
    covered: list[str]
    flavors: list[str]
    label_keys: set[str] = field(default_factory=set)


@dataclass
class Node:
    """A ClusterQueue ("cq", name) or a Cohort ("cohort", name) in the quota tree."""

    key: tuple[str, str]
    parent: tuple[str, str] | None
    quotas: dict[FR, Quota] = field(default_factory=dict)
    children: list[tuple[str, str]] = field(default_factory=list)


def _quotas(resource_groups: list[dict]) -> tuple[dict[FR, Quota], list[ResourceGroup]]:
    quotas, groups = {}, []
    for group in resource_groups or []:
        groups.append(ResourceGroup(list(group.get("coveredResources") or []), []))
        for flavor in group.get("flavors") or []:
            groups[-1].flavors.append(flavor["name"])
            for res in flavor.get("resources") or []:
                borrow, lend = res.get("borrowingLimit"), res.get("lendingLimit")
                quotas[(flavor["name"], res["name"])] = Quota(
                    quantity.parse(res.get("nominalQuota", 0)),
                    None if borrow is None else quantity.parse(borrow),
                    None if lend is None else quantity.parse(lend),
                )
    return quotas, groups


class Tree:
    """The ClusterQueues and Cohorts, with the usage of admitted workloads per ClusterQueue."""

    def __init__(self, cluster_queues: list[dict], cohorts: list[dict], usage: dict[str, dict[FR, Fraction]]):
        self.nodes: dict[tuple[str, str], Node] = {}
        self.groups: dict[str, list[ResourceGroup]] = {}
        for cohort in cohorts:
            quotas, _ = _quotas((cohort.get("spec") or {}).get("resourceGroups"))
            parent = (cohort.get("spec") or {}).get("parentName")
            key = ("cohort", cohort["metadata"]["name"])
            self.nodes[key] = Node(key, ("cohort", parent) if parent else None, quotas)
        for cq in cluster_queues:
            spec = cq.get("spec") or {}
            quotas, groups = _quotas(spec.get("resourceGroups"))
            cohort = spec.get("cohortName") or spec.get("cohort")
            key = ("cq", cq["metadata"]["name"])
            self.nodes[key] = Node(key, ("cohort", cohort) if cohort else None, quotas)
            self.groups[cq["metadata"]["name"]] = groups
        for node in list(self.nodes.values()):  # a cohort named but not created exists implicitly, with no quota
            parent = node.parent
            while parent and parent not in self.nodes:
                self.nodes[parent] = Node(parent, None)
        for node in self.nodes.values():
            if node.parent:
                self.nodes[node.parent].children.append(node.key)
        self.usage = {("cq", name): dict(fr) for name, fr in usage.items()}
        self._subtree: dict[tuple[str, str], dict[FR, Fraction]] = {}
        for key in self.nodes:
            self.subtree(key)
        self._cohort_usage()

    def subtree(self, key) -> dict[FR, Fraction]:
        if key not in self._subtree:
            node = self.nodes[key]
            total = {fr: q.nominal for fr, q in node.quotas.items()}
            for child in node.children:
                for fr, amount in self.subtree(child).items():
                    total[fr] = total.get(fr, Fraction(0)) + amount - self.guaranteed(child, fr)
            self._subtree[key] = total
        return self._subtree[key]

    def guaranteed(self, key, fr: FR) -> Fraction:
        """What the node keeps for itself (not lent to its cohort): nominal minus lendingLimit."""
        quota = self.nodes[key].quotas.get(fr)
        if quota is None or quota.lending is None:
            return Fraction(0)
        return max(Fraction(0), self.subtree(key).get(fr, Fraction(0)) - quota.lending)

    def _cohort_usage(self) -> None:
        def walk(key) -> dict[FR, Fraction]:
            node = self.nodes[key]
            if key[0] == "cq":
                return self.usage.setdefault(key, {})
            total: dict[FR, Fraction] = {}
            for child in node.children:
                for fr, amount in walk(child).items():
                    total[fr] = total.get(fr, Fraction(0)) + max(Fraction(0), amount - self.guaranteed(child, fr))
            self.usage[key] = total
            return total

        for key, node in self.nodes.items():
            if node.parent is None:
                walk(key)

    def available(self, key, fr: FR) -> Fraction:
        node = self.nodes[key]
        quota = self.subtree(key).get(fr, Fraction(0))
        used = self.usage.get(key, {}).get(fr, Fraction(0))
        if node.parent is None:
            return quota - used
        guaranteed = self.guaranteed(key, fr)
        local = max(Fraction(0), guaranteed - used)
        parent = self.available(node.parent, fr)
        limit = node.quotas.get(fr)
        if limit is not None and limit.borrowing is not None:
            stored = quota - guaranteed
            used_in_parent = max(Fraction(0), used - guaranteed)
            parent = min(stored - used_in_parent + limit.borrowing, parent)
        return local + parent

    def potential(self, key, fr: FR) -> Fraction:
        node = self.nodes[key]
        quota = self.subtree(key).get(fr, Fraction(0))
        if node.parent is None:
            return quota
        total = self.guaranteed(key, fr) + self.potential(node.parent, fr)
        limit = node.quotas.get(fr)
        if limit is not None and limit.borrowing is not None:
            total = min(quota + limit.borrowing, total)
        return total

    def nominal(self, cq: str, fr: FR) -> Fraction:
        quota = self.nodes[("cq", cq)].quotas.get(fr)
        return quota.nominal if quota else Fraction(0)

    def borrowing(self, cq: str) -> bool:
        key = ("cq", cq)
        return any(amount > self.subtree(key).get(fr, Fraction(0)) for fr, amount in self.usage.get(key, {}).items())


@dataclass
class PodSetResult:
    name: str
    count: int
    flavors: dict[str, str]  # resource -> flavor
    usage: dict[str, Fraction]  # resource -> total
    reasons: list[str]
    mode: int


def fits_quota(tree: Tree, cq: str, fr: FR, value: Fraction, preempt_while_borrowing: bool) -> tuple[int, str]:
    key = ("cq", cq)
    available = tree.available(key, fr)
    maximum = tree.potential(key, fr)
    flavor, res = fr
    if value > maximum:
        return NO_FIT, (
            f"insufficient quota for {res} in flavor {flavor}, request > maximum capacity "
            f"({quantity.text(res, value)} > {quantity.text(res, maximum)})"
        )
    if value <= available:
        return FIT, ""
    mode = PREEMPT if value <= tree.nominal(cq, fr) or preempt_while_borrowing else NO_FIT
    return mode, (
        f"insufficient unused quota for {res} in flavor {flavor}, {quantity.text(res, value - available)} more needed"
    )


def flavor_selector_spec(spec: dict, keys: set[str]) -> dict:
    """The pod's nodeSelector and required node affinity, narrowed to the label keys the group's flavors use:
    a term left empty matches every flavor (flavorassigner.flavorSelector)."""
    out: dict = {"nodeSelector": {k: v for k, v in (spec.get("nodeSelector") or {}).items() if k in keys}}
    terms = podspec.required_terms(spec)
    if terms:
        narrowed = []
        for term in terms:
            expressions = [e for e in term.get("matchExpressions") or [] if e["key"] in keys]
            if not expressions:
                narrowed = []
                break
            narrowed.append({"matchExpressions": expressions})
        if narrowed:
            out["affinity"] = {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": narrowed}}
            }
    return out


def taint_text(taint: dict) -> str:
    return f"{{{taint['key']} {taint.get('value', '')} {taint.get('effect', '')} <nil>}}"


def assign(
    tree: Tree,
    cq: str,
    flavors: dict[str, dict],
    podsets: list[dict],
    preempt_while_borrowing: bool,
    topology_check=None,
) -> list[PodSetResult]:
    """Flavor assignment for each pod set ({name, count, template, requests}), as Kueue's flavor assigner does
    with the default flavorFungibility (stop at the first flavor that fits, borrowing or not; otherwise keep the
    first flavor where preemption could help)."""
    groups = tree.groups[cq]
    for group in groups:
        group.label_keys = {
            k for f in group.flavors for k in ((flavors.get(f) or {}).get("spec") or {}).get("nodeLabels") or {}
        }
    accumulated: dict[FR, Fraction] = {}
    results = []
    for podset in podsets:
        requests = dict(podset["requests"])
        if any("pods" in g.covered for g in groups):
            requests["pods"] = Fraction(podset["count"])
        spec = podset["template"].get("spec") or {}
        chosen: dict[str, str] = {}
        reasons: list[str] = []
        worst = FIT
        for res in sorted(requests):
            if res in chosen:
                continue
            group = next((g for g in groups if res in g.covered), None)
            if group is None:
                reasons, worst, chosen = [f"resource {res} unavailable in ClusterQueue"], NO_FIT, {}
                break
            wanted = {r: v for r, v in requests.items() if r in group.covered}
            selector = flavor_selector_spec(spec, group.label_keys)
            best, best_mode, tried = None, NO_FIT, []
            for name in group.flavors:
                flavor = flavors.get(name)
                if flavor is None:
                    tried.append(f"flavor {name} not found")
                    continue
                fspec = flavor.get("spec") or {}
                if topology_check is not None:
                    problem = topology_check(podset, flavor)
                    if problem:
                        tried.append(problem)
                        continue
                taint = podspec.untolerated(
                    fspec.get("nodeTaints") or [], [*(spec.get("tolerations") or []), *(fspec.get("tolerations") or [])]
                )
                if taint is not None:
                    tried.append(f"untolerated taint {taint_text(taint)} in flavor {name}")
                    continue
                if not podspec.node_matches(selector, fspec.get("nodeLabels") or {}):
                    tried.append(f"flavor {name} doesn't match node affinity")
                    continue
                mode, here = FIT, {}
                for res_name, value in sorted(wanted.items()):
                    fr = (name, res_name)
                    res_mode, message = fits_quota(
                        tree, cq, fr, value + accumulated.get(fr, Fraction(0)), preempt_while_borrowing
                    )
                    if message:
                        tried.append(message)
                    mode = min(mode, res_mode)
                    if mode == NO_FIT:
                        break
                    here[res_name] = name
                if mode == FIT:
                    best, best_mode = here, FIT
                    break
                if mode > best_mode:
                    best, best_mode = here, mode
            if best is None or best_mode == NO_FIT:
                reasons, worst, chosen = tried, NO_FIT, {}
                break
            chosen.update(best)
            worst = min(worst, best_mode)
            if best_mode != FIT:
                reasons.extend(tried)
        result = PodSetResult(podset["name"], podset["count"], chosen, requests, reasons, worst)
        results.append(result)
        for res, flavor in chosen.items():
            fr = (flavor, res)
            accumulated[fr] = accumulated.get(fr, Fraction(0)) + requests[res]
        if worst == NO_FIT:
            break
    return results


def message(results: list[PodSetResult]) -> str:
    return "; ".join(
        f"couldn't assign flavors to pod set {r.name}: {', '.join(sorted(r.reasons))}" for r in results if r.reasons
    )
