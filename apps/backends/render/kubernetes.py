"""Render the console's desired state as Kubernetes objects: built-ins plus Kueue or Volcano.

`render_kubernetes(state)` is pure: no client, no cluster. The objects are plain dicts ready for
server-side apply, in dependency order:

1. PriorityClass per tier (pods name it; Volcano PodGroups too);
2. the queueing system's cluster-scoped objects (Kueue: WorkloadPriorityClass, ResourceFlavor,
   Cohort tree, ClusterQueue; Volcano: the Queue tree), each after what it refers to;
3. per bound namespace: the Namespace, its ResourceQuota backstop, and (Kueue) its LocalQueue;
4. the node pools' image pre-pull DaemonSets and their namespace (prepull.py).

Only queues bound to at least one namespace on this cluster are rendered: a queue bound elsewhere has
no quota here, so it neither admits nor lends here. Each one gets a caveat saying so.
"""

from __future__ import annotations

from types import ModuleType

from apps.backends.render import kueue, prepull, volcano
from apps.backends.render.caveats import caveats_for
from apps.backends.render.desired import DesiredState, QueueSpec
from apps.backends.render.errors import RenderError
from apps.backends.render.model import Plan, build_plan, queue_label
from apps.backends.render.names import require_dns_label, require_label_value
from apps.backends.render.objects import labels, meta, namespace, obj, resource_quota
from apps.backends.render.result import RenderResult

QUEUEING: dict[str, ModuleType] = {"kueue": kueue, "volcano": volcano}
# Binding these would put the console's labels and GPU quota on Kubernetes' own namespaces.
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})


def render_kubernetes(state: DesiredState) -> RenderResult:
    """All objects one Kubernetes cluster should hold, and the caveats of its queueing system."""
    backend = QUEUEING.get(state.queueing)
    if backend is None:
        raise RenderError("queueing", f"{state.queueing!r} is not one of {', '.join(sorted(QUEUEING))}")
    plan = build_plan(state)
    for model in plan.models.values():
        # the code names a ResourceFlavor (Kueue) or a resource (Volcano); the label selects nodes
        require_dns_label(model.code, f"GPU model {model.code!r}: code")
        require_label_value(model.product_label, f"GPU model {model.code}: product_label")
    bound = _bound_queues(plan)
    objects = [_priority_class(tier.name, tier.value, tier.preemptible, tier.description) for tier in plan.tiers]
    objects += backend.cluster_objects(plan, bound)
    for queue in bound:
        hard = backend.quota_hard(plan, queue)
        for ns in sorted(queue.namespaces):
            objects.append(namespace(ns, queue))
            if hard:
                objects.append(resource_quota(ns, queue, hard))
            objects += backend.namespace_objects(plan, queue, ns)
    pulls, pull_caveats = prepull.prepull_objects(state)
    objects += pulls
    caveats = caveats_for("kubernetes", state.queueing)
    caveats += _tier_caveats(plan)
    caveats += backend.caveats(plan, bound)
    caveats += [
        f"Queue {queue_label(q)} has no namespace on this cluster: nothing is rendered for it, and its "
        "guarantee is not lent here."
        for q in plan.queues
        if not q.namespaces
    ]
    return RenderResult(objects=objects, caveats=caveats + pull_caveats)


def _bound_queues(plan: Plan) -> list[QueueSpec]:
    """Queues with namespaces here, after checking each namespace is valid and bound to one queue only."""
    owner: dict[str, QueueSpec] = {}
    for queue in plan.queues:
        for ns in queue.namespaces:
            where = f"queue {queue_label(queue)}: namespace {ns!r}"
            require_dns_label(ns, where)
            if ns in SYSTEM_NAMESPACES:
                raise RenderError(where, "is a Kubernetes system namespace and cannot be bound to a queue")
            if ns in owner and owner[ns] is not queue:
                raise RenderError(where, f"is already bound to queue {queue_label(owner[ns])}")
            if ns in owner:
                raise RenderError(where, "is listed twice")
            owner[ns] = queue
    return [queue for queue in plan.queues if queue.namespaces]


def _priority_class(name: str, value: int, preemptible: bool, description: str) -> dict:
    # preemptionPolicy only says whether these pods may preempt others in kube-scheduler; see caveats.
    body: dict = {"value": value}
    if description:
        body["description"] = description
    body["preemptionPolicy"] = "PreemptLowerPriority" if preemptible else "Never"
    return obj("scheduling.k8s.io/v1", "PriorityClass", meta(name, label_set=labels()), **body)


def _tier_caveats(plan: Plan) -> list[str]:
    """A preemptible tier valued above a non-preemptible one can preempt it by priority."""
    out = []
    for protected in (t for t in plan.tiers if not t.preemptible):
        above = [t.name for t in plan.tiers if t.preemptible and t.value > protected.value]
        if above:
            out.append(
                f"Tier {protected.name} is non-preemptible but tiers {', '.join(above)} have higher values: "
                "kube-scheduler and Kueue's withinClusterQueue LowerPriority let them preempt it. Give "
                "non-preemptible tiers the highest values."
            )
    return out
