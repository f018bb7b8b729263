"""Volcano Queues (scheduling.volcano.sh/v1beta1) for the capacity plugin with hierarchy enabled.

Why the GPU pool is at the top of the tree. Volcano has no flavor object: a queue's deserved and capability
are amounts of resources, counted cluster-wide, and the stock NVIDIA device plugin advertises every model as
nvidia.com/gpu (per-model names need a renamed resource in the plugin's configuration, which stock
deployments do not have: pods would stay "Insufficient nvidia.com/gpu-h100"). A tenant queue holding
nvidia.com/gpu of several models could then have its H100 guarantee met by A100 jobs, or reclaim A100 jobs to
start an H100 one. So each pool (pools.py: a model's nodes, or a time-sliced or MPS pool of them) is a queue under
Volcano's root, with the tenant tree repeated beneath it for the tenants that have quota in it:

    root -> "<pool>" -> "<organization>-<pool>" -> ... -> "<tenant>-<pool>" -> leaf "<tenant>-<queue>-<pool>"

A workload names its pool's leaf and requests nvidia.com/gpu with the pool's node selector, so borrowing and
reclaim in nvidia.com/gpu stay among the jobs of one pool: a pool's queue deserves its subtree's guarantees
and is capped at its subtree's maxima, so it is never above deserved for another pool's jobs to reclaim, and
its own jobs can only take from its own subtree. Sites whose device plugin renames the resource per model set
`volcano_per_model_resources` and get nvidia.com/gpu-<code> in the same tree.
(https://github.com/volcano-sh/volcano/blob/master/docs/design/hierarchical-queue-on-capacity-plugin.md,
https://github.com/volcano-sh/volcano/blob/master/docs/user-guide/how_to_use_capacity_plugin.md)

Amounts per resource, in the pool's units per GPU (pools.py: cpu and memory, nvidia.com/gpu or replicas of it,
its MIG profiles, and with `volcano_vgpu` Volcano's vGPU resources volcano.sh/vgpu-number, vgpu-memory and
vgpu-cores, https://github.com/volcano-sh/volcano/blob/master/docs/user-guide/how_to_use_volcano_vgpu.md):
* leaf: deserved = guaranteed (every resource, 0 included, so reclaim sees every dimension a job requests,
  volcano#4658); guarantee.resource = guaranteed - lend_limit (the part never lent), only where positive;
  capability = guaranteed + borrow_limit, and for an unlimited borrow limit the pool's total guarantee,
  because the webhook rejects a capability below deserved in any dimension once one dimension is set.
* tenant and pool queues: the sums of their children, which is what Volcano's webhook checks (children must
  fit the parent). A pool queue carries its node selector in the annotation gpu-console/node-selector.
"""

from __future__ import annotations

from apps.backends.render.desired import QueueSpec, QuotaLine
from apps.backends.render.errors import RenderError
from apps.backends.render.model import Plan, line_max, line_never_lent, queue_label, queue_weight
from apps.backends.render.names import dns_label, is_qualified_name
from apps.backends.render.objects import GPU_RESOURCE, cpu_quantity, labels, memory_quantity, meta, obj
from apps.backends.render.pools import HAMI, Pool

API = "scheduling.volcano.sh/v1beta1"
ROOT_QUEUE = "root"
RESERVED_QUEUES = frozenset({"root", "default"})  # created by Volcano itself
WEIGHT_SCALE = 100  # Volcano weights are integers 1..65535; keeps two decimals of the console's weight
WEIGHT_MAX = 65535

POOL_LABEL = "gpu-console/pool"
NODE_SELECTOR_ANNOTATION = "gpu-console/node-selector"  # the pool's nodes, as a label selector

Amounts = dict[str, int]  # Volcano resource name -> amount (cpu in millicores, memory in MiB)


def resource_name(code: str) -> str:
    """The per-model extended resource, e.g. nvidia.com/gpu-h100."""
    name = f"{GPU_RESOURCE}-{code}"
    if not is_qualified_name(name):
        raise RenderError(f"GPU model {code}: code", f"{name!r} is not a valid Kubernetes resource name")
    return name


def gpu_resource(code: str, per_model: bool) -> str:
    """What counts a GPU of the model: nvidia.com/gpu, or the renamed nvidia.com/gpu-<code> where the site has it."""
    return resource_name(code) if per_model else GPU_RESOURCE


def leaf_queue_name(full_name: str, pool: str) -> str:
    """The leaf of queue "<tenant>-<queue>" in a pool: what its workloads name (see pools.pool_name)."""
    return dns_label(f"{full_name}-{pool}")


def tenant_queue_name(slug: str, pool: str) -> str:
    return dns_label(f"{slug}-{pool}")


def volcano_weight(weight: float) -> int:
    return max(1, min(WEIGHT_MAX, round(weight * WEIGHT_SCALE)))


def volcano_pools(plan: Plan, code: str) -> list[Pool]:
    """The model's pools with a subtree here: whole, time-sliced and MPS (HAMi on Volcano is its vGPU resources)."""
    return [pool for pool in plan.pools[code] if pool.kind != HAMI]


def pool_units(plan: Plan, pool: Pool) -> list[tuple[str, int]]:
    settings = plan.state.settings
    name = gpu_resource(pool.model.code, settings.volcano_per_model_resources)
    return pool.resources(settings, name, volcano=True)


def cluster_objects(plan: Plan, queues: list[QueueSpec]) -> list[dict]:
    """Per pool with quota: its queue, the tenant queues parents first, then the leaves (Volcano's webhook needs
    the parent to exist)."""
    objects: list[dict] = []
    owner: dict[str, str] = {}
    for code in plan.models:
        for pool in volcano_pools(plan, code):
            objects += _pool_tree(plan, pool, queues, owner)
    for name in sorted(RESERVED_QUEUES & owner.keys()):
        raise RenderError(f"{owner[name]}: name", f"{name!r} is a queue Volcano creates itself; rename it")
    return objects


def _claim(owner: dict[str, str], name: str, who: str, field: str) -> str:
    if name in owner:
        raise RenderError(
            f"{who}: {field}", f"its Volcano queue name {name!r} is also that of {owner[name]}; rename one"
        )
    owner[name] = who
    return name


def _pool_tree(plan: Plan, pool: Pool, queues: list[QueueSpec], owner: dict[str, str]) -> list[dict]:
    code = pool.model.code
    members = [(q, line) for q in queues for line in q.quotas if line.gpu_model == code]
    if not members:
        return []  # no bound queue has quota of this model: nothing can run in the pool through the console
    units = pool_units(plan, pool)
    order = [name for name, _ in units]
    total = {name: sum(line.guaranteed for _, line in members) * u for name, u in units}
    leaves = {q.full_name: _leaf_amounts(line, units, total) for q, line in members}
    involved = {tid for q, _ in members for tid in _ancestors(plan, q.tenant)}
    sums: dict[str, tuple[Amounts, Amounts, Amounts]] = {}
    for tenant in reversed(plan.tenants):  # children come after parents in plan order
        if tenant.slug not in involved:
            continue
        parts = [leaves[q.full_name] for q, _ in members if q.tenant == tenant.slug]
        parts += [sums[child] for child in plan.children.get(tenant.slug, ()) if child in involved]
        sums[tenant.slug] = (
            _add([p[0] for p in parts], order),
            _add([p[1] for p in parts], order),
            _add([p[2] for p in parts], order),
        )
    organizations = [sums[t.slug] for t in plan.tenants if t.slug in involved and t.parent is None]
    top = tuple(_add([o[i] for o in organizations], order) for i in range(3))
    pool_labels = {**labels(), POOL_LABEL: pool.name}
    selector = ",".join(f"{k}={v}" for k, v in pool.node_labels)
    name = _claim(
        owner, pool.name, f"GPU model {code}" if pool.name == code else f"the {pool.kind} pool of {code}", "code"
    )
    objects = [
        obj(
            API,
            "Queue",
            {"name": name, "labels": pool_labels, "annotations": {NODE_SELECTOR_ANNOTATION: selector}},
            spec=_spec(ROOT_QUEUE, volcano_weight(1.0), *top),
        )
    ]
    for tenant in plan.tenants:
        if tenant.slug not in involved:
            continue
        parent = tenant_queue_name(tenant.parent, pool.name) if tenant.parent else pool.name
        tname = _claim(owner, tenant_queue_name(tenant.slug, pool.name), f"tenant {tenant.slug}", "slug")
        spec = _spec(parent, volcano_weight(tenant.weight), *sums[tenant.slug])
        objects.append(
            obj(API, "Queue", meta(tname, label_set={**labels(tenant=tenant.slug), POOL_LABEL: pool.name}), spec=spec)
        )
    for queue, _ in members:
        lname = _claim(owner, leaf_queue_name(queue.full_name, pool.name), f"queue {queue_label(queue)}", "name")
        spec = _spec(
            tenant_queue_name(queue.tenant, pool.name), volcano_weight(queue_weight(queue)), *leaves[queue.full_name]
        )
        objects.append(
            obj(API, "Queue", meta(lname, label_set={**labels(queue=queue), POOL_LABEL: pool.name}), spec=spec)
        )
    return objects


def _ancestors(plan: Plan, slug: str | None) -> list[str]:
    out = []
    while slug is not None:
        out.append(slug)
        slug = plan.tenant_by_slug[slug].parent
    return out


def namespace_objects(plan: Plan, queue: QueueSpec, namespace: str) -> list[dict]:
    """Volcano has no namespaced queue object; workloads name the leaf queue themselves."""
    return []


def gpu_units(plan: Plan, code: str) -> int:
    """The most GPU resource one GPU of the model counts for in its pools here (replicas when time-sliced or MPS)."""
    return max(
        dict(pool_units(plan, pool)).get(gpu_resource(code, plan.state.settings.volcano_per_model_resources), 1)
        for pool in volcano_pools(plan, code)
    )


def quota_hard(plan: Plan, queue: QueueSpec) -> dict[str, int]:
    """ResourceQuota backstop in the GPU resource, in the units of each model's pool with the most per GPU.

    With nvidia.com/gpu: the queue's maxima summed, or nothing when one is unlimited. With per-model names:
    capped models get their maximum, models outside the queue's quota 0, unlimited ones no entry, and the
    plain nvidia.com/gpu 0, since an unnamed GPU request would bypass every queue limit.
    """
    lines = {line.gpu_model: line for line in queue.quotas}
    if not plan.state.settings.volcano_per_model_resources:
        maxima = [(code, line_max(line)) for code, line in lines.items()]
        if any(m is None for _, m in maxima):
            return {}
        return {f"requests.{GPU_RESOURCE}": sum(m * gpu_units(plan, code) for code, m in maxima if m)}
    hard = {f"requests.{GPU_RESOURCE}": 0}
    for code in plan.models:
        line = lines.get(code)
        maximum = 0 if line is None else line_max(line)
        if maximum is not None:
            hard[f"requests.{resource_name(code)}"] = maximum * gpu_units(plan, code)
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


def _quantity(name: str, value: int) -> int | str:
    if name == "cpu":
        return cpu_quantity(value)
    if name == "memory":
        return memory_quantity(value)
    return value


def _spec(parent: str, weight: int, deserved: Amounts, guarantee: Amounts, capability: Amounts) -> dict:
    spec: dict = {"parent": parent, "weight": weight, "reclaimable": True}
    if deserved:
        spec["deserved"] = {name: _quantity(name, v) for name, v in deserved.items()}
    if guarantee:
        spec["guarantee"] = {"resource": {name: _quantity(name, v) for name, v in guarantee.items()}}
    if capability:
        spec["capability"] = {name: _quantity(name, v) for name, v in capability.items()}
    return spec


def _leaf_amounts(line: QuotaLine, units: list[tuple[str, int]], total: Amounts) -> tuple[Amounts, Amounts, Amounts]:
    deserved: Amounts = {}
    guarantee: Amounts = {}
    capability: Amounts = {}
    maximum = line_max(line)
    for name, u in units:
        deserved[name] = line.guaranteed * u
        if line_never_lent(line) > 0:
            guarantee[name] = line_never_lent(line) * u
        capability[name] = total[name] if maximum is None else maximum * u
    return deserved, guarantee, capability


def _add(amounts: list[Amounts], order: list[str]) -> Amounts:
    """Sum per resource name, keys in the pool's resource order whatever order the parts came in."""
    total: Amounts = {}
    for amount in amounts:
        for name, value in amount.items():
            total[name] = total.get(name, 0) + value
    return {name: total[name] for name in order if name in total}
