"""Kueue objects (API kueue.x-k8s.io/v1beta2) for the console's tenants, queues, quotas and tiers.

Mapping (reference §1 and §6):
* GPU pool   -> ResourceFlavor per pool of each GPU model (pools.py): "<code>" selects the model's nodes by
                nvidia.com/gpu.product; "<code>-shared-<N>" its time-sliced nodes and "<code>-mps-<N>" its
                MPS nodes (product "-SHARED", nvidia.com/gpu.replicas N, nvidia.com/gpu.sharing-strategy
                time-slicing or mps); "<code>-hami" its HAMi nodes (the cluster's hami_node_labels).
                A pod's node selector names its pool's labels, so only that flavor fits it.
* tenant     -> Cohort named after the tenant slug, parentName = the parent tenant. Organizations hang
                under one root Cohort, ROOT_COHORT, so every queue on the cluster can lend to every
                other one, as the console's admission assumes (it lends nearest first, fleet-wide).
* queue      -> ClusterQueue "<tenant>-<queue>" in its tenant's Cohort, with one resource group covering
                every resource its workloads request: cpu, memory, nvidia.com/gpu, HAMi's nvidia.com/gpumem
                and nvidia.com/gpucores, and the MIG profiles (nvidia.com/mig-<profile>) the inventory
                has, less the prefixes the site's Kueue excludes (connection kueue_excluded_resources,
                mirroring Configuration resources.excludeResourcePrefixes). With Kueue's default
                configuration a workload requesting a resource its ClusterQueue does not cover is never
                admitted. One flavor per pool of each quota line; each resource's nominalQuota is the
                guarantee times the pool's units per GPU (pools.py), borrowingLimit / lendingLimit the
                limits times the same units when set (omitted = unlimited / lend everything).
                Every ClusterQueue has a cohortName, so both limits are legal (a CEL rule forbids
                borrowingLimit without one). Kueue's webhook wants a resource in one group only, a flavor
                in one group only, and each flavor listing the group's resources in its order
                (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/, pkg/webhooks/clusterqueue_webhook.go):
                one group satisfies all three.
* namespace  -> LocalQueue "<tenant>-<queue>" (the ClusterQueue's name), pointing at the ClusterQueue. A
                workload's `kueue.x-k8s.io/queue-name` label names a LocalQueue in its own namespace
                (https://kueue.sigs.k8s.io/docs/concepts/local_queue/), and the workload renderer sets
                it to the ClusterQueue's name, so the LocalQueue must carry that name. A namespace is
                bound to one queue (the ClusterQueue's namespaceSelector matches its tenant and queue
                labels), so the name is unique in it.
* tier       -> WorkloadPriorityClass with the tier's value.
* topology   -> with topology_scheduler kueue-tas, a Topology per GPU model (its levels: the cluster's topology
                labels every node of the model's whole-GPU pool carries, then kubernetes.io/hostname), named
                after the model like its whole-GPU flavor, which names it in topologyName (render/topology.py).
"""

from __future__ import annotations

from apps.backends.render.desired import QueueSpec, QuotaLine
from apps.backends.render.errors import RenderError
from apps.backends.render.model import INT32_MIN, Plan, line_max, queue_label, queue_weight
from apps.backends.render.names import dns_label
from apps.backends.render.objects import (
    GPU_RESOURCE,
    QUEUE_LABEL,
    TENANT_LABEL,
    cpu_quantity,
    labels,
    memory_quantity,
    meta,
    obj,
    weight_quantity,
)
from apps.backends.render.pools import HAMI_CORES, HAMI_MEMORY, MIG_PREFIX, WHOLE, Pool
from apps.backends.render.topology import tas_levels, topology_object

API = "kueue.x-k8s.io/v1beta2"
ROOT_COHORT = "gpu-console-root"


def cluster_queue_name(queue: QueueSpec) -> str:
    return dns_label(queue.full_name)


def cluster_objects(plan: Plan, queues: list[QueueSpec]) -> list[dict]:
    """Cluster-scoped Kueue objects, each after what it refers to."""
    if ROOT_COHORT in plan.tenant_by_slug:
        raise RenderError(f"tenant {ROOT_COHORT}: slug", "the name is reserved for the console's root Cohort in Kueue")
    _check_unique_names(queues)
    _check_flavor_names(plan)
    objects = [_workload_priority_class(tier.name, tier.value, tier.description) for tier in plan.tiers]
    tas = plan.state.settings.topology_scheduler == "kueue-tas"
    if tas:  # a Topology per model, before the flavors that name it (render/topology.py)
        objects += [
            topology_object(code, tas_levels(model, plan.state.nodes, plan.state.settings))
            for code, model in plan.models.items()
        ]
    objects += [
        obj(
            API,
            "ResourceFlavor",
            meta(pool.name),
            spec={"nodeLabels": pool.labels, **({"topologyName": code} if tas and pool.kind == WHOLE else {})},
        )
        for code in plan.models
        for pool in plan.pools[code]
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
    """ResourceQuota backstop: the queue's maximum over all models, or nothing when any model is unlimited.

    nvidia.com/gpu counts time-slice and MPS replicas and HAMi vGPUs too, so each model's maximum is taken in the
    units of its pool with the most nvidia.com/gpu per GPU: the backstop never refuses what a queue may hold.
    """
    maxima = [(line, line_max(line)) for line in queue.quotas]
    if any(m is None for _, m in maxima):
        return {}
    return {f"requests.{GPU_RESOURCE}": sum(m * gpu_units(plan, line.gpu_model) for line, m in maxima if m)}


def gpu_units(plan: Plan, code: str) -> int:
    """The most nvidia.com/gpu one GPU of the model counts for in any of its pools."""
    return max(dict(pool.resources(plan.state.settings)).get(GPU_RESOURCE, 1) for pool in plan.pools[code])


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


def covered_resources(plan: Plan, pools: list[Pool]) -> list[str]:
    """What the pools' workloads request, in a fixed order, less what the site's Kueue excludes by prefix."""
    names: set[str] = set()
    for pool in pools:
        names |= {name for name, _ in pool.resources(plan.state.settings)}
    mig = sorted(name for name in names if name.startswith(MIG_PREFIX))
    ordered = [n for n in ("cpu", "memory", GPU_RESOURCE, HAMI_MEMORY, HAMI_CORES) if n in names] + mig
    excluded = plan.state.settings.kueue_excluded_resources
    return [name for name in ordered if not any(name.startswith(prefix) for prefix in excluded)]


def _amount(name: str, value: int) -> int | str:
    if name == "cpu":
        return cpu_quantity(value)
    if name == "memory":
        return memory_quantity(value)
    return value


def _flavor_resource(name: str, line: QuotaLine, units: int) -> dict:
    """One resource of one flavor: the line's GPUs in this resource's units (limits only where it has units)."""
    resource: dict = {"name": name, "nominalQuota": _amount(name, line.guaranteed * units)}
    if units and line.borrow_limit is not None:
        resource["borrowingLimit"] = _amount(name, line.borrow_limit * units)
    if units and line.lend_limit is not None:
        resource["lendingLimit"] = _amount(name, line.lend_limit * units)
    return resource


def _cluster_queue(plan: Plan, queue: QueueSpec, preemption: dict) -> dict:
    lines = [(line, pool) for line in plan.lines(queue) for pool in plan.pools[line.gpu_model]]
    covered = covered_resources(plan, [pool for _, pool in lines])
    flavors = []
    for line, pool in lines:
        units = dict(pool.resources(plan.state.settings))
        flavors.append(
            {"name": pool.name, "resources": [_flavor_resource(name, line, units.get(name, 0)) for name in covered]}
        )
    spec: dict = {
        "cohortName": queue.tenant,
        "namespaceSelector": {"matchLabels": {TENANT_LABEL: queue.tenant, QUEUE_LABEL: queue.name}},
        "queueingStrategy": "BestEffortFIFO",
    }
    if flavors:  # a queue without quota lines admits nothing; Kueue needs at least one flavor per group
        spec["resourceGroups"] = [{"coveredResources": covered, "flavors": flavors}]
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


def _check_flavor_names(plan: Plan) -> None:
    """A pool's flavor ("<code>-shared-4", "<code>-hami") may not take another model's name, nor be invalid."""
    owner: dict[str, str] = {}
    for code in plan.models:
        for pool in plan.pools[code]:
            if pool.name in owner:
                raise RenderError(
                    f"GPU model {code}: code",
                    f"its {pool.kind} pool's ResourceFlavor {pool.name!r} is also that of {owner[pool.name]}",
                )
            owner[pool.name] = f"GPU model {code}" if pool.name == code else f"the {pool.kind} pool of {code}"
            if dns_label(pool.name) != pool.name:
                raise RenderError(f"GPU model {code}: code", f"{pool.name!r} is not a valid ResourceFlavor name")
