"""Build the DesiredState of one cluster from the database: what the renderers turn into backend objects."""

from __future__ import annotations

from collections import defaultdict

from apps.accounts.models import Tenant
from apps.backends.render.desired import (
    DesiredState,
    GpuModelRef,
    NodeRef,
    PrepullPool,
    QueueSpec,
    QuotaLine,
    QuotaSettings,
    TenantSpec,
    TierSpec,
)
from apps.backends.render.objects import PRODUCT_LABEL
from apps.fleet.models import Node, NodePool
from apps.tenancy.models import PriorityTier, QueueBinding, Quota


def _tree_order(path: str) -> tuple[int, ...]:
    """A tenant's place in the tree, parents first: "/9/12/" sorts after "/9/" and before "/10/" (as numbers)."""
    return tuple(int(part) for part in path.strip("/").split("/") if part)


def gpu_node_refs(cluster) -> tuple[NodeRef, ...]:
    """The cluster's GPU nodes as the last inventory sync saw them (vanished ones left out)."""
    rows = Node.objects.filter(cluster=cluster, vanished_at__isnull=True, gpu_count__gt=0).order_by("name")
    return tuple(
        NodeRef(n.name, dict(n.labels or {}), n.gpu_count, n.cpu_cores, n.memory_mib)
        for n in rows.only("name", "labels", "gpu_count", "cpu_cores", "memory_mib")
    )


def model_ref(model) -> GpuModelRef:
    """A GpuModel as the renderers see it: its first product label is the one its nodes are selected by."""
    return GpuModelRef(model.code, model.name, (model.product_labels or [model.name])[0], model.code, model.memory_mib)


def prepull_pools(cluster, nodes: tuple[NodeRef, ...]) -> tuple[PrepullPool, ...]:
    """The cluster's node pools that list images to pre-pull, each with the node label that selects its nodes (one
    query; a second when there are such pools). `nodes`: the cluster's GPU nodes (`gpu_node_refs`).

    A pool's nodes are those whose label of some key has the pool's name as its value (the inventory sync named
    the pool after such a label: gpu-console/pool, a cloud's node-pool label); failing that, the GPU model's product
    label when every node of that model is in the pool. Neither: no node label, and the renderer says so."""
    pools = [p for p in NodePool.objects.filter(cluster=cluster).select_related("gpu_model") if p.prepull_images]
    if not pools:
        return ()
    labels: dict[int, list[dict]] = defaultdict(list)
    for pool_id, node_labels in Node.objects.filter(pool__in=pools, vanished_at__isnull=True).values_list(
        "pool_id", "labels"
    ):
        labels[pool_id].append(node_labels or {})
    out = []
    for pool in sorted(pools, key=lambda p: p.name):
        out.append(
            PrepullPool(
                pool.name,
                tuple(pool.prepull_images),
                _pool_selector(pool, labels[pool.pk], nodes),
                tuple(pool.taints or ()),
            )
        )
    return tuple(out)


def _pool_selector(pool, pool_labels: list[dict], nodes: tuple[NodeRef, ...]) -> tuple[tuple[str, str], ...]:
    if pool_labels:
        common = set(pool_labels[0].items()).intersection(*(set(found.items()) for found in pool_labels[1:]))
        named = sorted(key for key, value in common if value == pool.name)
        if named:
            return ((named[0], pool.name),)
    if pool.gpu_model is not None:
        product = model_ref(pool.gpu_model).product_label
        of_model = sum(1 for node in nodes if node.labels.get(PRODUCT_LABEL) == product)
        in_pool = sum(1 for found in pool_labels if found.get(PRODUCT_LABEL) == product)
        if of_model and of_model == in_pool == len(pool_labels):
            return ((PRODUCT_LABEL, product),)
    return ()


def build_desired_state(cluster, tenant_ids: set[int] | None = None) -> DesiredState:
    """Queues bound to `cluster` with their quotas, the tenant tree above them, every tier, the inventory's
    GPU nodes (their labels place them in pools, their size gives cpu and memory per GPU) and the node pools' image
    pre-pull lists. Seven queries, eight when a pool pre-pulls.

    `tenant_ids`: only the queues of these tenants (a user's view; None: every queue, as pushed), so the totals
    of the tenants above them count those queues only."""
    bindings = QueueBinding.objects.filter(cluster=cluster).select_related("queue__tenant")
    if tenant_ids is not None:
        bindings = bindings.filter(queue__tenant_id__in=tenant_ids)
    bindings = list(bindings)
    queue_ids = [b.queue_id for b in bindings]
    quotas: dict[int, list[QuotaLine]] = defaultdict(list)
    models: dict[str, GpuModelRef] = {}
    for quota in Quota.objects.filter(queue_id__in=queue_ids).select_related("gpu_model").order_by("gpu_model__code"):
        model = quota.gpu_model
        models[model.code] = model_ref(model)
        quotas[quota.queue_id].append(
            QuotaLine(
                model.code, quota.guaranteed, quota.borrow_limit, quota.lend_limit, quota.weight, quota.per_user_limit
            )
        )
    tenant_ids = {tid for b in bindings for tid in b.queue.tenant.ancestor_ids()}
    tenants = {t.pk: t for t in Tenant.objects.filter(pk__in=tenant_ids)}
    guaranteed: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for binding in bindings:
        for line in quotas[binding.queue_id]:
            for tid in binding.queue.tenant.ancestor_ids():
                guaranteed[tid][line.gpu_model] += line.guaranteed
    tenant_specs = tuple(
        TenantSpec(
            t.slug,
            t.name,
            tenants[t.parent_id].slug if t.parent_id in tenants else None,
            dict(sorted(guaranteed[t.pk].items())),
        )
        for t in sorted(tenants.values(), key=lambda t: _tree_order(t.path))
    )
    queue_specs = tuple(
        QueueSpec(
            b.queue.tenant.slug, b.queue.name, tuple(b.namespaces or ()), b.slurm_account, tuple(quotas[b.queue_id])
        )
        for b in sorted(bindings, key=lambda b: (_tree_order(b.queue.tenant.path), b.queue.name))
    )
    tiers = tuple(
        TierSpec(t.name, t.value, t.preemptible, t.may_borrow, t.description) for t in PriorityTier.objects.all()
    )
    nodes = gpu_node_refs(cluster)
    return DesiredState(
        cluster=cluster.name,
        tenants=tenant_specs,
        queues=queue_specs,
        tiers=tiers,
        gpu_models=tuple(models[c] for c in sorted(models)),
        queueing=(cluster.connection or {}).get("queueing", "kueue"),
        nodes=nodes,
        settings=QuotaSettings.from_connection(cluster.connection or {}),
        prepull=prepull_pools(cluster, nodes),
    )
