"""kube-scheduler's filter plugins and its failure message, over a snapshot of nodes and bound pods.

Filters, in the order of the default profile
(https://kubernetes.io/docs/reference/scheduling/config/#scheduling-plugins): NodeUnschedulable, TaintToleration
(a node that is not Ready carries the `node.kubernetes.io/not-ready` NoSchedule taint the node lifecycle
controller adds: https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/#taint-based-evictions),
NodeAffinity (nodeSelector and required node affinity), NodeResourcesFit (cpu, memory, pods and every extended
resource a pod requests, per node: GPUs, MIG instances, an RDMA device plugin's rdma/ib or nvidia.com/hostdev:
https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources),
InterPodAffinity (required pod affinity and anti-affinity on a topologyKey:
https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#inter-pod-affinity-and-anti-affinity).
The failure message is the scheduler's FitError: "0/N nodes are available: <count> <reason>, ... ." followed by the
preemption plugin's own "preemption: 0/N nodes are available: ..." (pkg/scheduler/framework/types.go,
plugins/defaultpreemption).

Not modelled: scoring (the first feasible node by name wins, where the real scheduler spreads by
LeastAllocated), preemption of lower-priority pods by kube-scheduler (its message part is produced, never the
eviction), volumes, ports, topology spread constraints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from tests.backends.k8s_fake import podspec, quantity
from tests.backends.k8s_fake.podspec import Requests

TERMINAL = {"Succeeded", "Failed"}
UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
POD_AFFINITY = "node(s) didn't match pod affinity rules"
POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
GATED = "Scheduling is blocked due to non-empty scheduling gates"


@dataclass
class Reason:
    text: str
    unresolvable: bool  # UnschedulableAndUnresolvable: preemption cannot help on this node


@dataclass
class NodeInfo:
    node: dict
    allocatable: Requests
    requested: Requests = field(default_factory=dict)
    pods: list[dict] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.node["metadata"]["name"]

    @property
    def labels(self) -> dict:
        return self.node["metadata"].get("labels") or {}


def is_bound(pod: dict) -> bool:
    return bool(pod["spec"].get("nodeName")) and (pod.get("status") or {}).get("phase") not in TERMINAL


class Snapshot:
    """Nodes with what their bound, unfinished pods request (a terminating pod holds its resources until it is
    gone), and the pods themselves for pod (anti-)affinity. `assume` places a pod tentatively."""

    def __init__(self, nodes: list[dict], pods: list[dict], namespaces: dict[str, dict]):
        self.nodes = {
            n["metadata"]["name"]: NodeInfo(
                n, {k: quantity.parse(v) for k, v in ((n.get("status") or {}).get("allocatable") or {}).items()}
            )
            for n in sorted(nodes, key=lambda n: n["metadata"]["name"])
        }
        self.namespaces = namespaces  # name -> labels
        for pod in pods:
            if is_bound(pod) and pod["spec"]["nodeName"] in self.nodes:
                self.assume(pod, pod["spec"]["nodeName"])

    def assume(self, pod: dict, node: str) -> None:
        info = self.nodes[node]
        info.pods.append(pod)
        podspec.add(info.requested, podspec.pod_requests(pod["spec"]))

    def forget(self, pod: dict, node: str) -> None:
        info = self.nodes[node]
        info.pods.remove(pod)
        podspec.add(info.requested, podspec.pod_requests(pod["spec"]), times=-1)

    def all_pods(self) -> list[tuple[dict, NodeInfo]]:
        return [(p, info) for info in self.nodes.values() for p in info.pods]


def ready(node: dict) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def filter_node(
    pod: dict,
    info: NodeInfo,
    snapshot: Snapshot,
    *,
    ignored: set[str] = frozenset(),
    extra: Callable[[dict, NodeInfo, Snapshot], list[Reason]] | None = None,
) -> list[Reason]:
    """Why `pod` cannot run on `info`'s node (empty: it fits). The first failing plugin decides, except that
    NodeResourcesFit names every insufficient resource, as the real plugins do."""
    spec = pod["spec"]
    tolerations = spec.get("tolerations") or []
    node = info.node
    if (node.get("spec") or {}).get("unschedulable") and not any(
        podspec.tolerates(t, UNSCHEDULABLE_TAINT) for t in tolerations
    ):
        return [Reason(UNSCHEDULABLE, True)]
    taints = list((node.get("spec") or {}).get("taints") or [])
    if not ready(node):
        taints.append(NOT_READY_TAINT)
    taint = podspec.untolerated(taints, tolerations)
    if taint is not None:
        return [Reason(f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}", True)]
    if not podspec.node_matches(spec, info.labels, info.name):
        return [Reason(AFFINITY, True)]
    reasons = _resources(pod, info, ignored)
    if reasons:
        return reasons
    reasons = _pod_affinity(pod, info, snapshot)
    if reasons:
        return reasons
    return extra(pod, info, snapshot) if extra else []


def _resources(pod: dict, info: NodeInfo, ignored: set[str]) -> list[Reason]:
    """NodeResourcesFit: each requested resource against the node's allocatable minus what its pods request."""
    reasons = []
    allowed_pods = info.allocatable.get("pods")
    if allowed_pods is not None and len(info.pods) + 1 > allowed_pods:
        reasons.append(Reason("Too many pods", False))
    for name, amount in sorted(podspec.pod_requests(pod["spec"]).items()):
        if name in ignored or amount <= 0:
            continue
        free = info.allocatable.get(name, 0) - info.requested.get(name, 0)
        if free < amount:
            reasons.append(Reason(f"Insufficient {name}", False))
    return reasons


def _term_namespaces(term: dict, owner_ns: str, snapshot: Snapshot) -> Callable[[str], bool]:
    names = set(term.get("namespaces") or [])
    selector = term.get("namespaceSelector")
    if not names and selector is None:
        return lambda ns: ns == owner_ns
    return lambda ns: ns in names or (
        selector is not None and podspec.selector_matches(selector, snapshot.namespaces.get(ns, {}))
    )


def _term_matches(term: dict, owner_ns: str, other: dict, snapshot: Snapshot) -> bool:
    meta = other["metadata"]
    if not _term_namespaces(term, owner_ns, snapshot)(meta.get("namespace", "")):
        return False
    selector = term.get("labelSelector")
    return selector is not None and podspec.selector_matches(selector, meta.get("labels") or {})


def _required(pod: dict, kind: str) -> list[dict]:
    return (
        ((pod["spec"].get("affinity") or {}).get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    ) or []


def _pod_affinity(pod: dict, info: NodeInfo, snapshot: Snapshot) -> list[Reason]:
    ns = pod["metadata"].get("namespace", "")
    others = [(p, n) for p, n in snapshot.all_pods() if p is not pod]
    affinity = _required(pod, "podAffinity")
    if affinity:
        # A node without every term's topologyKey label never satisfies it; a term holds where a matching pod
        # runs in the same topology domain. The first pod of a group that matches its own terms may go to any
        # node with the labels when no pod matches yet (plugins/interpodaffinity/filtering.go).
        if any(term["topologyKey"] not in info.labels for term in affinity):
            return [Reason(POD_AFFINITY, True)]
        any_match = False
        satisfied = True
        for term in affinity:
            key = term["topologyKey"]
            matching = [n for p, n in others if _term_matches(term, ns, p, snapshot) and key in n.labels]
            any_match |= bool(matching)
            if not any(n.labels[key] == info.labels[key] for n in matching):
                satisfied = False
        if not satisfied:
            self_match = all(_term_matches(term, ns, pod, snapshot) for term in affinity)
            if any_match or not self_match:
                return [Reason(POD_AFFINITY, True)]
    for term in _required(pod, "podAntiAffinity"):
        key = term["topologyKey"]
        if key in info.labels and any(
            key in n.labels and n.labels[key] == info.labels[key] and _term_matches(term, ns, p, snapshot)
            for p, n in others
        ):
            return [Reason(POD_ANTI_AFFINITY, False)]
    for other, other_node in others:
        for term in _required(other, "podAntiAffinity"):
            key = term["topologyKey"]
            if (
                key in info.labels
                and other_node.labels.get(key) == info.labels[key]
                and _term_matches(term, other["metadata"].get("namespace", ""), pod, snapshot)
            ):
                return [Reason(EXISTING_ANTI_AFFINITY, False)]
    return []


def histogram(per_node: dict[str, list[Reason]]) -> list[str]:
    counts: dict[str, int] = {}
    for reasons in per_node.values():
        for reason in reasons:
            counts[reason.text] = counts.get(reason.text, 0) + 1
    return sorted(f"{count} {text}" for text, count in counts.items())


def fit_error(total: int, per_node: dict[str, list[Reason]], *, preemption: bool = True, policy: str = "") -> str:
    """The scheduler's message for a pod no node fits; the preemption part is DefaultPreemption's
    (a pod whose preemptionPolicy is Never is not eligible to preempt)."""
    message = f"0/{total} nodes are available: {', '.join(histogram(per_node))}."
    if preemption and policy == "Never":
        message += " preemption: not eligible due to preemptionPolicy=Never."
    elif preemption:
        verdicts: dict[str, int] = {}
        for reasons in per_node.values():
            why = (
                "Preemption is not helpful for scheduling"
                if any(r.unresolvable for r in reasons)
                else "No preemption victims found for incoming pod"
            )
            verdicts[why] = verdicts.get(why, 0) + 1
        detail = ", ".join(sorted(f"{count} {why}" for why, count in verdicts.items()))
        message += f" preemption: 0/{total} nodes are available: {detail}."
    return message


def condition(kind: str, status: str, now: str, reason: str = "", message: str = "") -> dict:
    out = {"type": kind, "status": status, "lastTransitionTime": now}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def set_condition(pod: dict, new: dict) -> bool:
    """Replace the pod's condition of that type; True if anything but the time changed."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    old = next((c for c in conditions if c["type"] == new["type"]), None)
    if old is not None and all(old.get(k) == new.get(k) for k in ("status", "reason", "message")):
        return False
    pod["status"]["conditions"] = [c for c in conditions if c["type"] != new["type"]] + [new]
    return True


def queue_order(pod: dict) -> tuple:
    """The scheduling queue's order: higher priority first, then the older pod
    (https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/)."""
    return (-(pod["spec"].get("priority") or 0), pod["metadata"]["creationTimestamp"], pod["metadata"]["name"])


class KubeScheduler:
    """One scheduler profile: binds the pending pods whose `schedulerName` is one of `names`, one at a time."""

    names: tuple[str, ...] = ("default-scheduler", "")
    ignored: frozenset[str] = frozenset()

    def __init__(self, plane):
        self.plane = plane

    def extra(self, pod: dict, info: NodeInfo, snapshot: Snapshot) -> list[Reason]:
        return []

    def on_bind(self, pod: dict, info: NodeInfo, snapshot: Snapshot) -> None:
        pass

    def fit_message(self, pod: dict, total: int, per_node: dict[str, list[Reason]]) -> str:
        return fit_error(total, per_node, policy=pod["spec"].get("preemptionPolicy", ""))

    def place(self, pod: dict, snapshot: Snapshot) -> tuple[str | None, dict[str, list[Reason]]]:
        per_node: dict[str, list[Reason]] = {}
        for name, info in snapshot.nodes.items():
            reasons = filter_node(pod, info, snapshot, ignored=self.ignored, extra=self.extra)
            if not reasons:
                return name, per_node
            per_node[name] = reasons
        return None, per_node

    def schedule(self, now: datetime) -> bool:
        plane = self.plane
        pending = [
            p
            for p in plane.store.all("", "pods")
            if not p["spec"].get("nodeName")
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase", "Pending") == "Pending"
            and (p["spec"].get("schedulerName") or "") in self.names
        ]
        if not pending:
            return False
        snapshot = plane.snapshot()
        stamp = plane.stamp(now)
        changed = False
        for pod in sorted(pending, key=queue_order):
            if pod["spec"].get("schedulingGates"):
                if set_condition(pod, condition("PodScheduled", "False", stamp, "SchedulingGated", GATED)):
                    plane.save(plane.pods, pod)
                continue
            node, per_node = self.place(pod, snapshot)
            if node is not None:
                self.bind(pod, node, snapshot, stamp)
                changed = True
                continue
            message = self.fit_message(pod, len(snapshot.nodes), per_node)
            if set_condition(pod, condition("PodScheduled", "False", stamp, "Unschedulable", message)):
                plane.save(plane.pods, pod)
                plane.event(now, pod, "FailedScheduling", message)
        return changed

    def bind(self, pod: dict, node: str, snapshot: Snapshot, stamp: str) -> None:
        self.on_bind(pod, snapshot.nodes[node], snapshot)
        pod["spec"]["nodeName"] = node
        snapshot.assume(pod, node)
        set_condition(pod, condition("PodScheduled", "True", stamp))
        self.plane.save(self.plane.pods, pod)
