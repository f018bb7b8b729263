"""Volcano Queues (scheduling.volcano.sh/v1beta1) for the capacity plugin with hierarchy enabled.

Mapping (reference §2 and §6):
* GPU model -> the extended resource nvidia.com/gpu-<code>; Volcano has no flavor object.
* tenant    -> a Queue named after the slug; organizations have parent "root" (the queue Volcano
               creates for the hierarchy). Its deserved / guarantee / capability are the sums of its
               children's, which is what Volcano's webhook checks (children must fit the parent).
* queue     -> a leaf Queue "<tenant>-<queue>" with parent = its tenant:
               deserved = guaranteed (every model of the queue, 0 included, so reclaim sees the
               dimension, volcano#4658); guarantee.resource = guaranteed - lend_limit (the part never
               lent), only where positive; capability = guaranteed + borrow_limit, and for an unlimited
               borrow limit the cluster's total guarantee of that model, because the webhook rejects
               a capability below deserved in any dimension once one dimension is set. Models the
               queue has no quota for get capability 0: as in the console, the queue cannot use them.
"""

from __future__ import annotations

from apps.backends.render.desired import QueueSpec
from apps.backends.render.errors import RenderError
from apps.backends.render.model import Plan, line_max, line_never_lent, queue_label, queue_weight
from apps.backends.render.names import dns_label, is_qualified_name
from apps.backends.render.objects import GPU_RESOURCE, labels, meta, obj

API = "scheduling.volcano.sh/v1beta1"
ROOT_QUEUE = "root"
RESERVED_QUEUES = frozenset({"root", "default"})  # created by Volcano itself
WEIGHT_SCALE = 100  # Volcano weights are integers 1..65535; keeps two decimals of the console's weight
WEIGHT_MAX = 65535

Amounts = dict[str, int]  # Volcano resource name -> GPUs


def resource_name(code: str) -> str:
    """The per-model extended resource, e.g. nvidia.com/gpu-h100."""
    name = f"{GPU_RESOURCE}-{code}"
    if not is_qualified_name(name):
        raise RenderError(f"GPU model {code}: code", f"{name!r} is not a valid Kubernetes resource name")
    return name


def leaf_queue_name(queue: QueueSpec) -> str:
    return dns_label(queue.full_name)


def volcano_weight(weight: float) -> int:
    return max(1, min(WEIGHT_MAX, round(weight * WEIGHT_SCALE)))


def cluster_objects(plan: Plan, queues: list[QueueSpec]) -> list[dict]:
    """Tenant queues parents first, then the leaf queues: Volcano's webhook needs the parent to exist."""
    _check_names(plan, queues)
    names = {code: resource_name(code) for code in plan.models}
    pool = {code: sum(line.guaranteed for q in queues for line in q.quotas if line.gpu_model == code) for code in names}
    leaves = {queue.full_name: _leaf_amounts(plan, queue, names, pool) for queue in queues}
    sums = _tenant_sums(plan, queues, leaves, list(names.values()))
    objects = []
    for tenant in plan.tenants:
        deserved, guarantee, capability = sums[tenant.slug]
        spec = _spec(tenant.parent or ROOT_QUEUE, volcano_weight(tenant.weight), deserved, guarantee, capability)
        objects.append(obj(API, "Queue", meta(tenant.slug, label_set=labels(tenant=tenant.slug)), spec=spec))
    for queue in queues:
        deserved, guarantee, capability = leaves[queue.full_name]
        spec = _spec(queue.tenant, volcano_weight(queue_weight(queue)), deserved, guarantee, capability)
        objects.append(obj(API, "Queue", meta(leaf_queue_name(queue), label_set=labels(queue=queue)), spec=spec))
    return objects


def namespace_objects(plan: Plan, queue: QueueSpec, namespace: str) -> list[dict]:
    """Volcano has no namespaced queue object; workloads name the leaf queue themselves."""
    return []


def quota_hard(plan: Plan, queue: QueueSpec) -> dict[str, int]:
    """ResourceQuota backstop per model resource.

    Capped models get their maximum, models outside the queue's quota 0, unlimited ones no entry.
    The plain nvidia.com/gpu gets 0: on a Volcano cluster the console's workloads always request a
    per-model name, and an unnamed GPU request would bypass every queue limit.
    """
    hard = {f"requests.{GPU_RESOURCE}": 0}
    lines = {line.gpu_model: line for line in queue.quotas}
    for code in plan.models:
        line = lines.get(code)
        maximum = 0 if line is None else line_max(line)
        if maximum is not None:
            hard[f"requests.{resource_name(code)}"] = maximum
    return hard


def caveats(plan: Plan, queues: list[QueueSpec]) -> list[str]:
    out = plan.weight_caveats(queues, "Volcano")
    weights = [(f"tenant {t.slug}", t.weight) for t in plan.tenants]
    weights += [(f"queue {queue_label(q)}", queue_weight(q)) for q in queues]
    for who, weight in weights:
        if round(weight * WEIGHT_SCALE) != volcano_weight(weight):
            out.append(
                f"The weight {weight:g} of {who} is outside what Volcano can hold (1..{WEIGHT_MAX} after x"
                f"{WEIGHT_SCALE}); rendered as {volcano_weight(weight)}."
            )
    return out


def _spec(parent: str, weight: int, deserved: Amounts, guarantee: Amounts, capability: Amounts) -> dict:
    spec: dict = {"parent": parent, "weight": weight, "reclaimable": True}
    if deserved:
        spec["deserved"] = deserved
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    if capability:
        spec["capability"] = capability
    return spec


def _leaf_amounts(
    plan: Plan, queue: QueueSpec, names: dict[str, str], pool: dict[str, int]
) -> tuple[Amounts, Amounts, Amounts]:
    deserved: Amounts = {}
    guarantee: Amounts = {}
    capability: Amounts = {}
    lines = {line.gpu_model: line for line in queue.quotas}
    for code, name in names.items():
        line = lines.get(code)
        if line is None:
            capability[name] = 0
            continue
        deserved[name] = line.guaranteed
        if line_never_lent(line) > 0:
            guarantee[name] = line_never_lent(line)
        maximum = line_max(line)
        capability[name] = pool[code] if maximum is None else maximum
    return deserved, guarantee, capability


def _tenant_sums(
    plan: Plan, queues: list[QueueSpec], leaves: dict[str, tuple[Amounts, Amounts, Amounts]], order: list[str]
) -> dict[str, tuple[Amounts, Amounts, Amounts]]:
    """Bottom-up sums over each tenant's own leaf queues and child tenants, per amount kind."""
    sums: dict[str, tuple[Amounts, Amounts, Amounts]] = {}
    for tenant in reversed(plan.tenants):  # children come after parents in plan order
        parts = [leaves[q.full_name] for q in queues if q.tenant == tenant.slug]
        parts += [sums[child] for child in plan.children.get(tenant.slug, ())]
        deserved, guarantee, capability = (_add([part[i] for part in parts], order) for i in range(3))
        sums[tenant.slug] = (deserved, guarantee, capability)
    return sums


def _add(amounts: list[Amounts], order: list[str]) -> Amounts:
    """Sum per resource name, keys in GPU-model order whatever order the parts came in."""
    total: Amounts = {}
    for amount in amounts:
        for name, value in amount.items():
            total[name] = total.get(name, 0) + value
    return {name: total[name] for name in order if name in total}


def _check_names(plan: Plan, queues: list[QueueSpec]) -> None:
    """Tenant and leaf queues share one cluster-wide name space with Volcano's own root and default."""
    owner: dict[str, str] = {}
    for tenant in plan.tenants:
        owner[tenant.slug] = f"tenant {tenant.slug}"
    for queue in queues:
        name = leaf_queue_name(queue)
        if name in owner:
            raise RenderError(
                f"queue {queue_label(queue)}: name",
                f"its Volcano queue name {name!r} is also that of {owner[name]}; rename one",
            )
        owner[name] = f"queue {queue_label(queue)}"
    for name in sorted(RESERVED_QUEUES & owner.keys()):
        raise RenderError(f"{owner[name]}: name", f"{name!r} is a queue Volcano creates itself; rename it")
