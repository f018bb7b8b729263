"""What a pod asks for, and the matching rules Kubernetes applies to it: requests, label selectors, node
selectors and required node affinity, taints and tolerations. Shared by the scheduler, Kueue and Volcano models.
"""

from __future__ import annotations

from fractions import Fraction

from tests.backends.k8s_fake import quantity

Requests = dict[str, Fraction]


def container_requests(container: dict) -> Requests:
    """A container's requests; a resource with only a limit requests its limit, as the API server defaults it
    (https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#requests-and-limits)."""
    resources = container.get("resources") or {}
    out = {name: quantity.parse(v) for name, v in (resources.get("limits") or {}).items()}
    out.update({name: quantity.parse(v) for name, v in (resources.get("requests") or {}).items()})
    return {k: v for k, v in out.items() if v}


def pod_requests(spec: dict) -> Requests:
    """The pod's effective requests: the sum over its containers (and restartable init containers, i.e.
    sidecars), at least the largest of its other init containers, plus its overhead
    (https://kubernetes.io/docs/concepts/workloads/pods/init-containers/#resource-sharing-within-containers)."""
    total: Requests = {}
    for container in spec.get("containers") or []:
        add(total, container_requests(container))
    sidecars: Requests = {}
    init_peak: Requests = {}
    for container in spec.get("initContainers") or []:
        wanted = container_requests(container)
        if container.get("restartPolicy") == "Always":
            add(sidecars, wanted)
            continue
        for name, amount in wanted.items():
            init_peak[name] = max(init_peak.get(name, Fraction(0)), amount + sidecars.get(name, Fraction(0)))
    add(total, sidecars)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, Fraction(0)), amount)
    add(total, {k: quantity.parse(v) for k, v in (spec.get("overhead") or {}).items()})
    return total


def add(into: Requests, more: Requests, times: int = 1) -> Requests:
    for name, amount in more.items():
        into[name] = into.get(name, Fraction(0)) + amount * times
    return into


# --- label selectors (metav1.LabelSelector) ---------------------------------------------------------------


def selector_matches(selector: dict | None, labels: dict) -> bool:
    """matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist); an empty selector matches everything
    (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#resources-that-support-set-based-requirements).
    Callers decide what a missing (null) selector means: it differs by API."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_expression(labels, expr) for expr in selector.get("matchExpressions") or [])


def _expression(labels: dict, expr: dict) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):  # node selector requirements only
        try:
            have, want = int(labels[key]), int(values[0])
        except (KeyError, ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    raise ValueError(f"unknown selector operator {op!r}")


# --- node selection (nodeSelector and required node affinity) ---------------------------------------------


def required_terms(spec: dict) -> list[dict] | None:
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return None if affinity is None else affinity.get("nodeSelectorTerms") or []


def node_matches(spec: dict, node_labels: dict, node_name: str = "") -> bool:
    """nodeSelector (every pair) and required node affinity (any term; within a term every expression): the
    NodeAffinity filter (https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#node-affinity).
    A term with no requirements matches no node."""
    if any(node_labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    terms = required_terms(spec)
    if terms is None:
        return True
    return any(_term_matches(term, node_labels, node_name) for term in terms)


def _term_matches(term: dict, labels: dict, node_name: str) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    if not all(_expression(labels, expr) for expr in expressions):
        return False
    return all(_expression({"metadata.name": node_name}, expr) for expr in fields)


# --- taints and tolerations -------------------------------------------------------------------------------


def tolerates(toleration: dict, taint: dict) -> bool:
    """https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/ : an empty effect matches
    every effect; operator Exists with an empty key tolerates everything; Equal (the default) needs the value."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return bool(toleration.get("key")) and toleration.get("value", "") == taint.get("value", "")


def untolerated(taints: list[dict], tolerations: list[dict], effects=("NoSchedule", "NoExecute")) -> dict | None:
    """The first taint with one of `effects` that no toleration tolerates, or None."""
    for taint in taints:
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None
