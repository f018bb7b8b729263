"""Kueue objects (API kueue.x-k8s.io/v1beta2) for the console's tenants, queues, quotas and tiers.

Mapping (reference §1 and §6):
* GPU model  -> ResourceFlavor named after the model code, selecting nodes by nvidia.com/gpu.product.
* tenant     -> Cohort named after the tenant slug, parentName = the parent tenant. Organizations hang
                under one root Cohort, ROOT_COHORT, so every queue on the cluster can lend to every
                other one, as the console's admission assumes (it lends nearest first, fleet-wide).
* queue      -> ClusterQueue "<tenant>-<queue>" in its tenant's Cohort, one resource group covering
                nvidia.com/gpu with one flavor per quota line: nominalQuota = guaranteed,
                borrowingLimit / lendingLimit when set (omitted = unlimited / lend everything).
                Every ClusterQueue has a cohortName, so both limits are legal (a CEL rule forbids
                borrowingLimit without one).
* namespace  -> LocalQueue "<tenant>-<queue>" (the ClusterQueue's name), pointing at the ClusterQueue. A
                workload's `kueue.x-k8s.io/queue-name` label names a LocalQueue in its own namespace
                (https://kueue.sigs.k8s.io/docs/concepts/local_queue/), and the workload renderer sets
                it to the ClusterQueue's name, so the LocalQueue must carry that name. A namespace is
                bound to one queue (the ClusterQueue's namespaceSelector matches its tenant and queue
                labels), so the name is unique in it.
* tier       -> WorkloadPriorityClass with the tier's value.
"""

from __future__ import annotations

from apps.backends.render.desired import QueueSpec
from apps.backends.render.errors import RenderError
from apps.backends.render.model import INT32_MIN, Plan, line_max, queue_label, queue_weight
from apps.backends.render.names import dns_label
from apps.backends.render.objects import (
    GPU_RESOURCE,
    PRODUCT_LABEL,
    QUEUE_LABEL,
    TENANT_LABEL,
    labels,
    meta,
    obj,
    weight_quantity,
)

API = "kueue.x-k8s.io/v1beta2"
ROOT_COHORT = "gpu-console-root"


def cluster_queue_name(queue: QueueSpec) -> str:
    return dns_label(queue.full_name)


def cluster_objects(plan: Plan, queues: list[QueueSpec]) -> list[dict]:
    """Cluster-scoped Kueue objects, each after what it refers to."""
    if ROOT_COHORT in plan.tenant_by_slug:
        raise RenderError(f"tenant {ROOT_COHORT}: slug", "the name is reserved for the console's root Cohort in Kueue")
    _check_unique_names(queues)
    objects = [_workload_priority_class(tier.name, tier.value, tier.description) for tier in plan.tiers]
    objects += [
        obj(API, "ResourceFlavor", meta(model.code), spec={"nodeLabels": {PRODUCT_LABEL: model.product_label}})
        for model in plan.models.values()
    ]
    objects.append(obj(API, "Cohort", meta(ROOT_COHORT), spec={}))
    for tenant in plan.tenants:
        spec = {"parentName": tenant.parent or ROOT_COHORT, "fairSharing": {"weight": weight_quantity(tenant.weight)}}
        objects.append(obj(API, "Cohort", meta(tenant.slug, label_set=labels(tenant=tenant.slug)), spec=spec))
    preemption = _preemption(plan)
    objects += [_cluster_queue(plan, queue, preemption) for queue in queues]
    return objects


def namespace_objects(plan: Plan, queue: QueueSpec, namespace: str) -> list[dict]:
    """The LocalQueue through which the namespace's workloads reach the queue's ClusterQueue.

    Named like the ClusterQueue: that is the name the workloads' queue-name label carries.
    """
    name = cluster_queue_name(queue)
    spec = {"clusterQueue": name}
    return [obj(API, "LocalQueue", meta(name, namespace=namespace, label_set=labels(queue=queue)), spec=spec)]


def quota_hard(plan: Plan, queue: QueueSpec) -> dict[str, int]:
    """ResourceQuota backstop: the queue's maximum over all models, or nothing when any model is unlimited."""
    maxima = [line_max(line) for line in queue.quotas]
    if any(m is None for m in maxima):
        return {}
    return {f"requests.{GPU_RESOURCE}": sum(m for m in maxima if m is not None)}


def caveats(plan: Plan, queues: list[QueueSpec]) -> list[str]:
    return plan.weight_caveats(queues, "Kueue")


def _workload_priority_class(name: str, value: int, description: str) -> dict:
    body: dict = {"value": value}
    if description:
        body["description"] = description
    return obj(API, "WorkloadPriorityClass", meta(name), **body)


def _preemption(plan: Plan) -> dict:
    """Same policy for every ClusterQueue; the tiers decide the borrowWithinCohort threshold.

    * withinClusterQueue LowerPriority: a higher tier preempts a lower one inside the queue.
    * reclaimWithinCohort Any: a queue takes its lent guarantee back from borrowers whatever their
      priority (the console's reclaim: victims are borrowing workloads).
    * borrowWithinCohort LowerPriority up to just below the lowest non-preemptible tier: a borrowing
      workload may preempt lower, preemptible work elsewhere in the cohort, never a protected tier.
    """
    protected = [tier.value for tier in plan.tiers if not tier.preemptible]
    borrow: dict = {"policy": "LowerPriority"}
    if protected:
        threshold = min(protected) - 1
        if threshold < INT32_MIN:
            borrow = {"policy": "Never"}
        else:
            borrow["maxPriorityThreshold"] = threshold
    return {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any", "borrowWithinCohort": borrow}


def _cluster_queue(plan: Plan, queue: QueueSpec, preemption: dict) -> dict:
    flavors = []
    for line in plan.lines(queue):
        resource: dict = {"name": GPU_RESOURCE, "nominalQuota": line.guaranteed}
        if line.borrow_limit is not None:
            resource["borrowingLimit"] = line.borrow_limit
        if line.lend_limit is not None:
            resource["lendingLimit"] = line.lend_limit
        flavors.append({"name": line.gpu_model, "resources": [resource]})
    spec: dict = {
        "cohortName": queue.tenant,
        "namespaceSelector": {"matchLabels": {TENANT_LABEL: queue.tenant, QUEUE_LABEL: queue.name}},
        "queueingStrategy": "BestEffortFIFO",
    }
    if flavors:  # a queue without quota lines admits nothing; Kueue needs at least one flavor per group
        spec["resourceGroups"] = [{"coveredResources": [GPU_RESOURCE], "flavors": flavors}]
    spec["preemption"] = preemption
    spec["fairSharing"] = {"weight": weight_quantity(queue_weight(queue))}
    return obj(API, "ClusterQueue", meta(cluster_queue_name(queue), label_set=labels(queue=queue)), spec=spec)


def _check_unique_names(queues: list[QueueSpec]) -> None:
    """ "<tenant>-<queue>" can collide (tenant "a-b" queue "c" vs tenant "a" queue "b-c"): refuse, never merge."""
    owner: dict[str, QueueSpec] = {}
    for queue in queues:
        name = cluster_queue_name(queue)
        if name in owner:
            raise RenderError(
                f"queue {queue_label(queue)}: name",
                f"its ClusterQueue name {name!r} is also that of queue {queue_label(owner[name])}; rename one",
            )
        owner[name] = queue
