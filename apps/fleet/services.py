"""Fleet services: clusters, node pools' pre-pull lists and inventory sync. Each state change is permission-checked
and audited."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from psycopg.types.json import Jsonb

from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.audit.services import record_event, snapshot
from apps.backends.base import BackendError
from apps.backends.registry import backend_class, get_backend
from apps.backends.render.names import image_error
from apps.backends.types import ConnectionReport
from apps.core.errors import Conflict, InvalidInput, refuse_if_referenced
from apps.core.secrets import secret_env_error
from apps.core.text import translate
from apps.fleet.inventory import ModelResolver, fingerprint, gpu_fields, node_fields, pool_taints
from apps.fleet.links import METRICS_URL_PLACEHOLDERS, template_outbound_error, url_template_error
from apps.fleet.models import (
    FABRIC_FIELDS,
    Cluster,
    ClusterKind,
    ClusterStatus,
    Gpu,
    GpuModel,
    Node,
    NodePool,
    NodeState,
)

logger = logging.getLogger(__name__)

SYNC_LEASE = timedelta(minutes=10)
_NODE_UPDATE_FIELDS = [
    "pool",
    "gpu_model",
    "labels",
    "taints",
    "unschedulable",
    "state",
    "state_reason",
    "rack",
    "leaf_switch",
    "nvlink_domain",
    "gpu_count",
    "gpu_allocatable",
    "gpu_allocated",
    "gpu_unhealthy",
    "cpu_cores",
    "memory_mib",
    "extended_resources",
    "fingerprint",
    "last_seen_at",
    "vanished_at",
]
_GPU_UPDATE_FIELDS = [
    "uuid",
    "model",
    "memory_mib",
    "mig_enabled",
    "mig_instances",
    "health",
    "health_reason",
    "allocated_to",
    "allocated_fraction",
]


#
# Clusters
#


def _validated(cluster: Cluster) -> None:
    if not isinstance(cluster.connection or {}, dict):
        raise InvalidInput(_("Invalid cluster."), {"connection": _("A JSON object of settings.")})
    try:
        cluster.full_clean(exclude=["status"])
    except ValidationError as exc:
        raise InvalidInput(_("Invalid cluster."), exc.message_dict) from exc
    logs_url = (cluster.connection or {}).get("logs_url")
    if logs_url is not None and (problem := url_template_error(logs_url)):
        raise InvalidInput(
            _("connection.logs_url: %(problem)s") % {"problem": problem},
            {"connection": _("logs_url: %(problem)s") % {"problem": problem}},
        )
    stream_logs = (cluster.connection or {}).get("stream_logs", True)
    if not isinstance(stream_logs, bool):
        message = _("stream_logs: true or false (whether the console streams its workloads' logs).")
        raise InvalidInput(_("connection.%(message)s") % {"message": message}, {"connection": message})
    metrics_url = (cluster.connection or {}).get("inference_metrics_url")
    if metrics_url is not None and (
        problem := url_template_error(metrics_url, METRICS_URL_PLACEHOLDERS) or template_outbound_error(metrics_url)
    ):
        message = f"inference_metrics_url: {problem}"
        raise InvalidInput(_("connection.%(message)s") % {"message": message}, {"connection": message})
    if cluster.secret_env and (problem := secret_env_error(cluster.secret_env)):
        raise InvalidInput(_("secret_env: %(problem)s") % {"problem": problem}, {"secret_env": problem})
    try:
        kind = backend_class(cluster.kind)
    except BackendError as exc:
        raise InvalidInput(str(exc), {"kind": str(exc)}) from exc
    problems = kind.connection_errors(cluster.connection or {})
    if problems:
        message = "; ".join(problems)
        raise InvalidInput(_("connection.%(message)s") % {"message": message}, {"connection": message})


def create_cluster(
    actor,
    *,
    name: str,
    kind: str,
    connection: dict | None = None,
    secret_env: str = "",
    description: str = "",
    sync_enabled: bool = True,
    reason: str = "",
) -> Cluster:
    """Register a cluster. For a simulated one, `connection` is the fleet shape and its simulation is set up."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins add clusters."))
    if _simulation_of(kind) is not None:
        return _create_simulated(actor, name, kind, connection or {}, description, sync_enabled=sync_enabled)
    cluster = Cluster(
        name=name,
        kind=kind,
        connection=connection or {},
        secret_env=secret_env,
        description=description,
        sync_enabled=sync_enabled,
    )
    _validated(cluster)
    with transaction.atomic():
        try:
            with transaction.atomic():
                cluster.save()
        except IntegrityError as exc:
            raise Conflict(
                _("A cluster named %(name)s already exists.") % {"name": repr(name)}, {"name": _("Already taken.")}
            ) from exc
        record_event(actor, "cluster.create", cluster, reason=reason, after=snapshot(cluster))
    return cluster


def _simulation_of(kind: str):
    """The simulation controls' class of a kind of cluster whose backend simulates it; None for real clusters."""
    try:
        return backend_class(kind).simulation_class
    except BackendError:  # no such kind: the cluster's own validation says so
        return None


def create_simulated_cluster(actor, name: str, shape: dict, description: str = "") -> Cluster:
    """Create a `simulated` cluster with the fleet `shape` (platform admins; `actor=None` is the system, from
    `manage.py simulate` or the demo). Returns the fleet Cluster; its simulation is set up with it."""
    return _create_simulated(actor, name, ClusterKind.SIMULATED, shape, description)


def _create_simulated(
    actor, name: str, kind: str, shape: dict, description: str, *, sync_enabled: bool = True
) -> Cluster:
    if actor is not None:
        require(actor, Action.ADMINISTER, None, "Only platform admins create clusters.")
    simulation = _simulation_of(kind)
    shape = simulation.clean_shape(shape)
    cluster = Cluster(name=name, kind=kind, description=description, connection=shape, sync_enabled=sync_enabled)
    try:
        cluster.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        raise InvalidInput(_("Invalid cluster."), exc.message_dict) from exc
    with transaction.atomic():
        try:
            with transaction.atomic():
                cluster.save()
        except IntegrityError as exc:
            raise Conflict(
                _("A cluster named %(name)s already exists.") % {"name": repr(name)}, {"name": _("Already taken.")}
            ) from exc
        get_backend(cluster).simulation().set_up()
        record_event(
            actor,
            "cluster.create",
            cluster,
            reason=f"simulated fleet: {simulation.describe_shape(shape)}",
            after=snapshot(cluster),
        )
    return cluster


def update_cluster(actor, cluster: Cluster, *, reason: str = "", **changes) -> Cluster:
    """Change a cluster's description, connection settings, secret variable name or sync switch."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins change clusters."))
    allowed = {"description", "connection", "secret_env", "sync_enabled"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput(_("These fields cannot be changed."), {key: _("Cannot be changed.") for key in unknown})
    before = snapshot(cluster)
    for key, value in changes.items():
        setattr(cluster, key, value)
    _validated(cluster)
    with transaction.atomic():
        cluster.save(update_fields=[*changes.keys()])
        record_event(actor, "cluster.update", cluster, reason=reason, before=before, after=snapshot(cluster))
    return cluster


def delete_cluster(actor, cluster: Cluster, *, reason: str = "") -> None:
    """Forget a cluster and its inventory (the backend itself is untouched)."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins delete clusters."))
    with transaction.atomic():
        record_event(actor, "cluster.delete", cluster, reason=reason, before=snapshot(cluster))
        with refuse_if_referenced(cluster):
            cluster.delete()


MAX_PREPULL_IMAGES = 20


def set_pool_prepull(actor, pool: NodePool, images, *, reason: str = "") -> NodePool:
    """Set the images `pool`'s nodes keep pulled (a list of pinned image references; [] stops pre-pulling). The
    cluster receives it with its next quota push (a DaemonSet on Kubernetes, the simulator's image cache)."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins set what a node pool pre-pulls."))
    if not isinstance(images, list) or not all(isinstance(image, str) for image in images):
        raise InvalidInput(_("Invalid pre-pull list."), {"images": _("A list of image references.")})
    wanted = list(dict.fromkeys(image.strip() for image in images if image.strip()))
    if len(wanted) > MAX_PREPULL_IMAGES:
        message = _("At most %(max)s images.") % {"max": MAX_PREPULL_IMAGES}
        raise InvalidInput(_("Invalid pre-pull list."), {"images": message})
    problems = [
        _("%(image)s: %(problem)s") % {"image": image, "problem": translate(problem)}
        for image in wanted
        if (problem := image_error(image)) is not None
    ]
    if problems:
        raise InvalidInput(_("Invalid pre-pull list."), {"images": problems})
    before = {"prepull_images": list(pool.prepull_images or [])}
    if before["prepull_images"] == wanted:
        return pool
    with transaction.atomic():
        pool.prepull_images = wanted
        pool.save(update_fields=["prepull_images"])
        record_event(actor, "pool.prepull", pool, reason=reason, before=before, after={"prepull_images": wanted})
    return pool


def check_connection(actor, cluster: Cluster) -> ConnectionReport:
    """Ask the backend whether it answers and what it has. Reads only: no audit event."""
    require(actor, Action.OPERATE, None, _("Testing a connection needs on-call or platform-admin."))
    try:
        return get_backend(cluster).test_connection()
    except BackendError as exc:
        return ConnectionReport(ok=False, message=str(exc))


#
# Node pools
#


def update_pool_fabric(actor, pool: NodePool, *, reason: str = "", **changes) -> NodePool:
    """Declare a node pool's fabric (none, ethernet, roce, infiniband) and its settings: the RDMA resource its device
    plugin advertises, NCCL's HCAs, socket interface and RoCE GID index, the pods' Multus networks, the Slurm GRES
    (docs/networking.md). The whole fabric is checked for the pool's cluster (`Backend.fabric_errors`): a setting
    of another fabric or another kind of cluster is refused naming it, and nothing changes."""
    require(actor, Action.ADMINISTER, None, _("Only platform admins declare node pools' fabrics."))
    unknown = set(changes) - set(FABRIC_FIELDS)
    if unknown:
        raise InvalidInput(_("These fields cannot be changed."), {key: _("Cannot be changed.") for key in unknown})
    before = snapshot(pool)
    for key, value in changes.items():
        setattr(pool, key, value)
    problems = backend_class(pool.cluster.kind).fabric_errors(pool.fabric_settings(), pool.cluster.connection or {})
    if not problems:
        try:
            pool.full_clean(validate_unique=False, validate_constraints=False)
        except ValidationError as exc:
            problems = [(field, " ".join(messages)) for field, messages in exc.message_dict.items()]
    if problems:
        fields: dict[str, list[str]] = {}
        for field, message in problems:
            fields.setdefault(field, []).append(str(translate(message)))
        summary = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in fields.items())
        raise InvalidInput(
            _("Invalid fabric for pool %(pool)s: %(problems)s") % {"pool": str(pool), "problems": summary}, fields
        )
    with transaction.atomic():
        pool.save(update_fields=[*changes.keys()])
        record_event(actor, "pool.update", pool, reason=reason, before=before, after=snapshot(pool))
    return pool


#
# Inventory sync
#


@dataclass
class SyncResult:
    cluster: str
    ok: bool
    nodes: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    vanished: int = 0
    duration_ms: int = 0
    error: str = ""
    skipped: bool = False


def _claim(cluster_id: int) -> bool:
    now = timezone.now()
    from django.db.models import Q

    return (
        Cluster.objects.filter(
            Q(sync_started_at__isnull=True) | Q(sync_started_at__lt=now - SYNC_LEASE), pk=cluster_id
        ).update(sync_started_at=now)
        == 1
    )


def sync_inventory(cluster_id: int) -> SyncResult:
    """Read the backend's inventory and upsert nodes and GPUs in bulk; mark nodes that vanished.

    The backend is called outside any transaction. Unchanged nodes (same fingerprint) cost nothing
    but a bulk `last_seen_at` update, so the number of queries does not grow with the fleet. A
    failing backend keeps the last good inventory and records the error on the cluster.

    A backend that watches for changes (Kubernetes) answers with only the nodes changed since the
    cluster's `inventory_cursor`: only their rows are written (nodes not reported are current, not
    gone, and keep their `last_seen_at`), and the new cursor is stored in the same transaction.
    """
    cluster = Cluster.objects.get(pk=cluster_id)
    if not _claim(cluster_id):
        return SyncResult(cluster=cluster.name, ok=True, skipped=True)
    started = time.monotonic()
    try:
        try:
            backend = get_backend(cluster)
            changes = getattr(backend, "inventory_since", None)  # Backend has it; a bare inventory() is enough
            inventory = changes(cluster.inventory_cursor or None) if changes else backend.inventory()
        except BackendError as exc:
            return _record_failure(cluster, started, exc)
        except Exception as exc:  # an unexpected backend bug must not kill the periodic loop
            logger.exception("inventory of %s failed", cluster.name)
            return _record_failure(cluster, started, exc)
        result = _apply_inventory(cluster, inventory)
        result.duration_ms = int((time.monotonic() - started) * 1000)
        Cluster.objects.filter(pk=cluster.pk).update(
            status=ClusterStatus.OK,
            last_sync_at=timezone.now(),
            last_sync_duration_ms=result.duration_ms,
            last_error="",
        )
        return result
    finally:
        Cluster.objects.filter(pk=cluster_id).update(sync_started_at=None)


def _record_failure(cluster: Cluster, started: float, exc: Exception) -> SyncResult:
    duration = int((time.monotonic() - started) * 1000)
    message = f"{type(exc).__name__}: {exc}" if not isinstance(exc, BackendError) else str(exc)
    Cluster.objects.filter(pk=cluster.pk).update(
        status=ClusterStatus.ERROR,
        last_error=message[:2000],
        last_error_at=timezone.now(),
        last_sync_duration_ms=duration,
    )
    return SyncResult(cluster=cluster.name, ok=False, error=message, duration_ms=duration)


def _pool_ids(cluster: Cluster, infos, resolver: ModelResolver) -> dict[str, int]:
    wanted = {}
    for info in infos:
        if info.pool and info.pool not in wanted:
            wanted[info.pool] = NodePool(
                cluster=cluster,
                name=info.pool,
                purpose=info.pool_purpose or "batch-training",
                gpu_model_id=resolver.resolve(info.gpu_model),
            )
    if not wanted:
        return {}
    NodePool.objects.bulk_create(wanted.values(), ignore_conflicts=True)
    return dict(NodePool.objects.filter(cluster=cluster, name__in=wanted).values_list("name", "id"))


def _sync_pool_taints(cluster: Cluster) -> None:
    """Each pool's taints from its nodes' (the ones they all carry, see `pool_taints`): what the workload
    renderers tolerate for work on that pool. Pools without a node left keep what they had."""
    by_pool: dict[int, list[list[dict]]] = {}
    current: dict[int, list[dict]] = {}
    rows = (
        Node.objects.filter(cluster=cluster, pool__isnull=False)
        .exclude(state=NodeState.VANISHED)
        .order_by("name")
        .values_list("pool_id", "taints", "pool__taints")
    )
    for pool_id, taints, pool_has in rows:
        by_pool.setdefault(pool_id, []).append(taints or [])
        current[pool_id] = pool_has
    stale = [
        NodePool(pk=pool_id, taints=taints)
        for pool_id, node_taints in by_pool.items()
        if (taints := pool_taints(node_taints)) != current[pool_id]
    ]
    if stale:
        NodePool.objects.bulk_update(stale, ["taints"])


_COPY_COLUMNS = (
    "index",
    "uuid",
    "model_id",
    "memory_mib",
    "mig_enabled",
    "mig_instances",
    "health",
    "health_reason",
    "allocated_to",
    "allocated_fraction",
)


def _copy_gpus(nodes: list[tuple[int, list]], resolver: ModelResolver) -> None:
    """Insert the GPU rows of nodes that have none with one COPY (the caller holds the transaction). COPY is
    PostgreSQL's: another database (the demo's SQLite) inserts them in bulk."""
    if not any(infos for _id, infos in nodes):
        return
    if connection.vendor != "postgresql":
        Gpu.objects.bulk_create(
            [Gpu(node_id=node_id, **gpu_fields(gpu, resolver)) for node_id, infos in nodes for gpu in infos],
            batch_size=500,
        )
        return
    columns = ", ".join(f'"{Gpu._meta.get_field(c.removesuffix("_id")).column}"' for c in ("node_id", *_COPY_COLUMNS))
    statement = f'COPY "{Gpu._meta.db_table}" ({columns}) FROM STDIN'
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for node_id, infos in nodes:
            for gpu in infos:
                row = gpu_fields(gpu, resolver)
                row["mig_instances"] = Jsonb(row["mig_instances"])
                copy.write_row((node_id, *(row[c] for c in _COPY_COLUMNS)))


def _copy_nodes(nodes: list[Node]) -> None:
    """Insert new Node rows with one COPY (the caller holds the transaction): every column but the id, each value
    prepared as Django's INSERT would (`first_seen_at` set on add, JSON adapted), without its SQL and arrays. COPY is
    PostgreSQL's: another database (the demo's SQLite) inserts them in bulk."""
    if not nodes:
        return
    if connection.vendor != "postgresql":
        Node.objects.bulk_create(nodes, batch_size=500)
        return
    fields = [f for f in Node._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    statement = f"COPY {connection.ops.quote_name(Node._meta.db_table)} ({columns}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for node in nodes:
            copy.write_row([f.get_db_prep_save(f.pre_save(node, True), connection) for f in fields])


def _apply_inventory(cluster: Cluster, inventory) -> SyncResult:
    now = timezone.now()
    resolver = ModelResolver(GpuModel.objects.all())
    existing = {
        name: (pk, fp, state)
        for name, pk, fp, state in Node.objects.filter(cluster=cluster).values_list(
            "name", "id", "fingerprint", "state"
        )
    }
    complete = inventory.complete
    reported = set()
    changed_infos = []
    for info in inventory.nodes:
        reported.add(info.name)
        fp = fingerprint(info)
        prior = existing.get(info.name)
        if not (prior and prior[1] == fp and prior[2] != NodeState.VANISHED):
            changed_infos.append((info, fp))
    # Pools are looked up only for changed nodes, so an unchanged resync costs no pool queries.
    pools = _pool_ids(cluster, [info for info, _old in changed_infos], resolver)
    changed: list[tuple[Node, list]] = [
        (
            Node(
                cluster=cluster,
                name=info.name,
                pool_id=pools.get(info.pool),
                fingerprint=fp,
                last_seen_at=now,
                vanished_at=None,
                **node_fields(info, resolver),
            ),
            info.gpus,
        )
        for info, fp in changed_infos
    ]

    added = sum(1 for node, _old in changed if node.name not in existing)
    gone = (
        (name for name in existing if name not in reported)
        if complete
        else (n for n in inventory.removed if n in existing)
    )
    vanished_names = [name for name in gone if existing[name][2] != NodeState.VANISHED]
    with transaction.atomic():
        if changed:
            # Nodes new to the console are copied in (no row can conflict: the sync holds the cluster's claim and
            # read every node of the cluster above); the others are upserted.
            _copy_nodes([node for node, _old in changed if node.name not in existing])
            known_nodes = [node for node, _old in changed if node.name in existing]
            if known_nodes:
                Node.objects.bulk_create(
                    known_nodes,
                    update_conflicts=True,
                    unique_fields=["cluster", "name"],
                    update_fields=_NODE_UPDATE_FIELDS,
                )
            ids = dict(
                Node.objects.filter(cluster=cluster, name__in=[n.name for n, _old in changed]).values_list("name", "id")
            )
            # A node new to the console has no GPU rows yet: its GPUs are copied in (COPY, several times faster
            # than model instances and an upsert at 10,240 GPUs); the others' are upserted.
            fresh = [(ids[node.name], infos) for node, infos in changed if node.name not in existing]
            _copy_gpus(fresh, resolver)
            gpus = [
                Gpu(node_id=ids[node.name], **gpu_fields(g, resolver))
                for node, infos in changed
                if node.name in existing
                for g in infos
            ]
            keep = {(g.node_id, g.index) for g in gpus}
            # GPUs a changed node no longer reports (fallen off the bus, removed) go; the rest are upserted. Only
            # nodes the console knew can have such GPUs: a new node's are the ones just copied in.
            known = [ids[node.name] for node, _infos in changed if node.name in existing]
            stale = [
                pk
                for pk, node_id, index in (
                    Gpu.objects.filter(node_id__in=known).values_list("id", "node_id", "index") if known else ()
                )
                if (node_id, index) not in keep
            ]
            if stale:
                Gpu.objects.filter(pk__in=stale).delete()
            if gpus:
                Gpu.objects.bulk_create(
                    gpus, update_conflicts=True, unique_fields=["node", "index"], update_fields=_GPU_UPDATE_FIELDS
                )
        if vanished_names:
            Node.objects.filter(cluster=cluster, name__in=vanished_names).update(
                state=NodeState.VANISHED, vanished_at=now, gpu_allocated=0, fingerprint=""
            )
        if changed or vanished_names:
            _sync_pool_taints(cluster)
        if complete:
            # Everything still reported was seen now, changed or not: one UPDATE for the whole cluster.
            # (Not the rows just written with it: on a first sync that would write every node twice.)
            Node.objects.filter(cluster=cluster).exclude(state=NodeState.VANISHED).exclude(last_seen_at=now).update(
                last_seen_at=now
            )
        if (inventory.cursor or {}) != (cluster.inventory_cursor or {}):
            Cluster.objects.filter(pk=cluster.pk).update(inventory_cursor=inventory.cursor or {})
        if added or vanished_names:
            record_event(
                None,
                "fleet.inventory_changed",
                cluster,
                after={
                    "added": added,
                    "vanished": len(vanished_names),
                    "vanished_nodes": sorted(vanished_names)[:50],
                },
            )
    if complete:
        total = len(inventory.nodes)
    else:  # the nodes the cluster has: those known and not gone, and the ones added now
        total = sum(1 for n, (_id, _fp, state) in existing.items() if state != NodeState.VANISHED) + added
        total -= sum(1 for n in vanished_names if n in existing)
    return SyncResult(
        cluster=cluster.name,
        ok=True,
        nodes=total,
        added=added,
        updated=len(changed) - added,
        unchanged=total - len(changed),
        vanished=len(vanished_names),
    )
