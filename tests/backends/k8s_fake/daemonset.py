"""The DaemonSet controller (https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/).

- One pod per node the pod template selects: its nodeSelector and required node affinity must match the node, and
  the template must tolerate the node's NoSchedule and NoExecute taints together with the tolerations the
  controller adds to every daemon pod (section "Taints and tolerations": node.kubernetes.io/not-ready and
  unreachable with NoExecute; disk-pressure, memory-pressure, pid-pressure and unschedulable with NoSchedule;
  network-unavailable only for host-network pods). So a cordoned or not-ready node still gets its pod.
- Each pod is pinned to its node by required node affinity on the node's name (a `matchFields` term on
  `metadata.name`, section "How Daemon Pods are scheduled") and bound by the default scheduler, which still checks
  resources.
- A pod on a node that no longer qualifies, or of an older template, is deleted (the RollingUpdate strategy, all
  at once here: maxUnavailable is not modelled); a finished pod is replaced. Pods are named `<name>-<5 characters>`
  with the `controller-revision-hash` and `pod-template-generation` labels.
- Status: desiredNumberScheduled, currentNumberScheduled, numberMisscheduled, numberReady, numberAvailable,
  updatedNumberScheduled, observedGeneration (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/daemon-set-v1/).
- Create and update are refused as the API server's validation does (pkg/apis/apps/validation): a selector that
  does not match the template's labels ("`selector` does not match template `labels`"), and a template
  restartPolicy other than Always (the only value a DaemonSet allows).
"""

from __future__ import annotations

import copy
import hashlib
from datetime import datetime

from tests.backends.k8s_fake import podspec
from tests.backends.k8s_fake.store import ApiError

TERMINAL = {"Succeeded", "Failed"}
# The tolerations the DaemonSet controller adds to its pods (section "Taints and tolerations").
DAEMON_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
HOST_NETWORK_TOLERATION = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


def validate(obj: dict) -> None:
    """What the API server refuses of a DaemonSet (422 Invalid)."""
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    selector = spec.get("selector")
    name = (obj.get("metadata") or {}).get("name", "")
    if not selector or not podspec.selector_matches(selector, labels):
        raise ApiError(
            422,
            "Invalid",
            f'DaemonSet.apps "{name}" is invalid: spec.template.metadata.labels: Invalid value: '
            f"{labels}: `selector` does not match template `labels`",
        )
    policy = (template.get("spec") or {}).get("restartPolicy", "Always")
    if policy != "Always":
        raise ApiError(
            422,
            "Invalid",
            f'DaemonSet.apps "{name}" is invalid: spec.template.spec.restartPolicy: Unsupported value: "{policy}": '
            'supported values: "Always"',
        )


def _tolerations(template_spec: dict) -> list[dict]:
    added = [*DAEMON_TOLERATIONS, *([HOST_NETWORK_TOLERATION] if template_spec.get("hostNetwork") else [])]
    own = list(template_spec.get("tolerations") or [])
    return own + [t for t in added if t not in own]


def _runs_on(template_spec: dict, node: dict, tolerations: list[dict]) -> bool:
    labels = node["metadata"].get("labels") or {}
    if not podspec.node_matches(template_spec, labels, node["metadata"]["name"]):
        return False
    taints = (node.get("spec") or {}).get("taints") or []
    return podspec.untolerated(taints, tolerations) is None


def _pinned(template_spec: dict, node: str, tolerations: list[dict]) -> dict:
    """The pod's spec: the template's, its node affinity replaced by the node's name, the controller's tolerations."""
    spec = copy.deepcopy(template_spec)
    affinity = spec.setdefault("affinity", {})
    affinity["nodeAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]},
            ]
        }
    }
    spec["tolerations"] = tolerations
    return spec


def _pod_node(pod: dict) -> str:
    """The node a daemon pod is for: where it is bound, else the node its affinity names."""
    if pod["spec"].get("nodeName"):
        return pod["spec"]["nodeName"]
    terms = podspec.required_terms(pod["spec"]) or []
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return field["values"][0]
    return ""


def daemon_sets(plane, now: datetime) -> bool:
    resource = plane.resource("apps", "v1", "daemonsets")
    changed = False
    nodes = {n["metadata"]["name"]: n for n in plane.store.all("", "nodes")}
    for ds in plane.store.all("apps", "daemonsets"):
        if ds["metadata"].get("deletionTimestamp"):
            continue
        template = ds["spec"]["template"]
        revision = hashlib.sha256(repr(template).encode()).hexdigest()[:10]
        tolerations = _tolerations(template.get("spec") or {})
        wanted = {name for name, node in nodes.items() if _runs_on(template["spec"], node, tolerations)}
        pods = [p for p in plane.pods_of(ds) if not p["metadata"].get("deletionTimestamp")]
        kept: dict[str, dict] = {}
        for pod in pods:
            node = _pod_node(pod)
            stale = pod["metadata"].get("labels", {}).get("controller-revision-hash") != revision
            if node not in wanted or stale or node in kept or pod["status"].get("phase") in TERMINAL:
                plane.delete(plane.pods, pod, now)
                changed = True
            else:
                kept[node] = pod
        for node in sorted(wanted - set(kept)):
            suffix = hashlib.sha256(f"{ds['metadata']['uid']}/{node}/{revision}".encode()).hexdigest()[:5]
            labels = {
                "controller-revision-hash": revision,
                "pod-template-generation": str(ds["metadata"].get("generation", 1)),
            }
            pinned = {**template, "spec": _pinned(template["spec"], node, tolerations)}
            if plane.create_pod(ds, pinned, f"{ds['metadata']['name']}-{suffix}", labels, now):
                changed = True
        pods = [p for p in plane.pods_of(ds) if not p["metadata"].get("deletionTimestamp")]
        scheduled = [p for p in pods if p["spec"].get("nodeName")]
        ready = sum(1 for p in scheduled if _ready(p))
        status = {
            "observedGeneration": ds["metadata"].get("generation", 1),
            "desiredNumberScheduled": len(wanted),
            "currentNumberScheduled": sum(1 for p in scheduled if p["spec"]["nodeName"] in wanted),
            "numberMisscheduled": sum(1 for p in scheduled if p["spec"]["nodeName"] not in wanted),
            "numberReady": ready,
            "numberAvailable": ready,
            "updatedNumberScheduled": len(scheduled),
        }
        if ds.get("status") != status:
            ds["status"] = status
            plane.save(resource, ds)
            changed = True
    return changed


def _ready(pod: dict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
