"""What a submission needs to know before it is decided, read in one query.

A submission needs the caller's earlier workload under the same Idempotency-Key, the tenant, the
queue, the clusters bound to the queue with their node sizes for the GPU model, whether an admission
hold (a spent budget's, kept by chargeback) pauses the tenant's preemptible work, and (PostgreSQL) the
new workload's id. Read one by one through the ORM that is six queries, most of a submission's cost
under load; here it is one plain SQL statement (portable: PostgreSQL and the demo's SQLite). GPU models come from the
per-process reference cache, the clusters' node sizes from a cache of a few seconds (`node_sizes`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cache

from django.conf import settings
from django.db import connection

from apps.accounts.models import Tenant
from apps.core.refcache import cached
from apps.fleet.models import FABRIC_FIELDS, Cluster, GpuModel, NodePool, NodeState
from apps.tenancy.models import Queue, QueueBinding
from apps.workloads.rendering import RenderTables


def gpu_models() -> dict[str, GpuModel]:
    """The GPU catalog by code, from the per-process reference cache."""
    return cached("gpu-models", lambda: {m.code: m for m in GpuModel.objects.all()})


def catalog(models: list[GpuModel] | None = None) -> dict[str, dict]:
    """The GPU model catalog in the shape the spec parser takes (from `models` when already loaded)."""
    return {
        m.code: {
            "name": m.name,
            "memory_mib": m.memory_mib,
            "mig_profiles": m.mig_profiles,
            "product_labels": m.product_labels,
            "nvlink": m.nvlink,
        }
        for m in (models if models is not None else GpuModel.objects.all())
    }


@dataclass
class SubmissionContext:
    existing_id: int | None = None  # the caller's workload under this Idempotency-Key
    hold_id: int | None = None  # see apps.tenancy.services.holds.check_hold
    next_id: int | None = None  # the new workload's id, where the database hands ids out up front
    claim_id: int | None = None  # and its admission claim's
    tenant: Tenant | None = None
    queue: Queue | None = None
    bound: bool = False  # the queue is bound to at least one cluster
    bound_names: list[str] = field(default_factory=list)  # the clusters it is bound to, by name
    # cluster id -> (cluster, Counter of node GPU counts) for clusters with nodes of the model
    clusters: dict[int, tuple[Cluster, Counter]] = field(default_factory=dict)
    # cluster id -> what rendering reads for this queue there (`rendering.RenderTables`)
    render_tables: dict[int, RenderTables] = field(default_factory=dict)

    def candidates(self, named: str = "") -> list[tuple[Cluster, int]]:
        """The clusters bound to the queue that have nodes of the model (only `named`, when given), by name, each
        with its usual node size. Which one runs the work is admission's placement (apps/tenancy/placement.py)."""
        found = sorted(self.clusters.values(), key=lambda item: item[0].name)
        return [(c, sizes.most_common(1)[0][0]) for c, sizes in found if not named or c.name == named]


_SQL = (
    "SELECT t.id, t.name, t.slug, t.parent_id, t.path, q.id, q.name, b.id, c.id, c.name, c.kind, "
    # What rendering at submission reads too (apps/workloads/rendering.py), so it costs no query of its own.
    "t.archived_at, b.namespaces, b.slurm_account, c.connection, p.taints, "
    "(SELECT w.id FROM workloads_workload w WHERE w.created_by_id = %s AND w.idempotency_key = %s), "
    # An admission hold on the tenant or an ancestor: its preemptible work is paused (a spent budget's).
    "(SELECT h.id FROM tenancy_admissionhold h JOIN tenancy_tenant a ON a.id = h.tenant_id "
    "WHERE a.id = t.id OR (a.path <> '' AND t.path LIKE a.path || '%%') LIMIT 1), "
    "o.next_id, o.claim_id, "
    # The cluster's node pool of the GPU model (its taints above, its fabric here: FABRIC_FIELDS, in order), the
    # first by name as rendering.render_tables reads it.
    "p.name, p.fabric, p.rdma_resource, p.rdma_per_pod, p.nccl_ib_hca, p.nccl_socket_ifname, p.nccl_ib_gid_index, "
    "p.pod_networks, p.slurm_gres "
    "FROM ({next_id}) o "
    "LEFT JOIN tenancy_tenant t ON t.slug = %s "
    "LEFT JOIN tenancy_queue q ON q.tenant_id = t.id AND q.name = %s "
    "LEFT JOIN tenancy_queuebinding b ON b.queue_id = q.id "
    "LEFT JOIN fleet_cluster c ON c.id = b.cluster_id "
    "LEFT JOIN fleet_nodepool p ON p.id = (SELECT p2.id FROM fleet_nodepool p2 WHERE p2.cluster_id = c.id "
    "AND p2.gpu_model_id = %s ORDER BY p2.name LIMIT 1)"
)
_NODE_SIZES_SQL = (
    "SELECT cluster_id, gpu_count, COUNT(*) FROM fleet_node WHERE gpu_model_id = %s AND state <> %s "
    "GROUP BY cluster_id, gpu_count"
)


def node_sizes(model_id: int) -> dict[int, Counter]:
    """Per cluster, its nodes of the GPU model by GPUs per node; re-read at most every few seconds per process.

    Nodes change when inventory is synced (each minute), not per submission: counting a large fleet's
    nodes on every request would make a submission's cost grow with the fleet (the capacity figure
    admission uses is cached the same way, `ADMISSION_CAPACITY_CACHE_S`).
    """

    def load() -> dict[int, Counter]:
        sizes: dict[int, Counter] = {}
        with connection.cursor() as cursor:
            cursor.execute(_NODE_SIZES_SQL, [model_id, NodeState.VANISHED])
            for cluster_id, size, count in cursor.fetchall():
                sizes.setdefault(cluster_id, Counter())[size] += count
        return sizes

    return cached(f"node-sizes:{model_id}", load, ttl=settings.ADMISSION_CAPACITY_CACHE_S)


# PostgreSQL hands out the new workload's and claim's ids up front, so the INSERTs can carry the backend
# name derived from the id and go out as one statement (apps/core/inserts.py::insert_rows); the demo's
# SQLite has no sequences: it inserts row by row and updates the name after the INSERT.
_NEXT_ID = {
    "postgresql": "SELECT nextval({workload_seq}) AS next_id, nextval({claim_seq}) AS claim_id",
    "sqlite": "SELECT NULL AS next_id, NULL AS claim_id",
}


@cache
def _context_sql(vendor: str, reserve_ids: bool = True) -> str:
    """The context query for this database; PostgreSQL's sequences are looked up by name once per process
    (`pg_get_serial_sequence` in every statement cost PostgreSQL a catalog scan per submission). Without
    `reserve_ids` (a preview, which stores nothing) no id is taken from the sequences."""
    next_id = _NEXT_ID[vendor if reserve_ids else "sqlite"]
    if vendor == "postgresql" and reserve_ids:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT quote_literal(pg_get_serial_sequence('workloads_workload', 'id')), "
                "quote_literal(pg_get_serial_sequence('tenancy_admission', 'id'))"
            )
            workload_seq, claim_seq = cursor.fetchone()
        next_id = next_id.format(workload_seq=workload_seq, claim_seq=claim_seq)
    return _SQL.format(next_id=next_id)


_CONNECTION = Cluster._meta.get_field("connection")
_NAMESPACES = QueueBinding._meta.get_field("namespaces")
_TAINTS = NodePool._meta.get_field("taints")


def _json(field, value):
    """A JSON column's value as the model field reads it (psycopg and SQLite hand over its text)."""
    return None if value is None else field.from_db_value(value, None, connection)


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def load_context(
    user_id: int | None, idempotency_key: str | None, spec: dict, *, reserve_ids: bool = True
) -> SubmissionContext:
    """Everything named by the (not yet validated) spec; values of the wrong type simply match nothing.
    `reserve_ids=False` (a preview) leaves the new workload's and claim's ids None."""
    model = gpu_models().get(_text(spec.get("gpu_model")) or "")
    params = [
        user_id,
        idempotency_key,
        _text(spec.get("tenant")),
        _text(spec.get("queue")),
        model.pk if model else None,
    ]
    with connection.cursor() as cursor:
        cursor.execute(_context_sql(connection.vendor, reserve_ids), params)
        rows = cursor.fetchall()
    first = rows[0]
    context = SubmissionContext(existing_id=first[16], hold_id=first[17], next_id=first[18], claim_id=first[19])
    db = connection.alias
    sizes_by_cluster = node_sizes(model.pk) if model else {}
    for row in rows:
        t_id, t_name, slug, parent, path, q_id, q_name, b_id, c_id, c_name, kind = row[:11]
        archived_at, namespaces, slurm_account, cluster_connection, taints = row[11:16]
        if t_id is None:
            break
        if context.tenant is None:
            context.tenant = Tenant.from_db(
                db,
                ["id", "name", "slug", "parent_id", "path", "archived_at"],
                [t_id, t_name, slug, parent, path, archived_at],
            )
        if q_id is None:
            break
        if context.queue is None:
            context.queue = Queue.from_db(db, ["id", "tenant_id", "name"], [q_id, t_id, q_name])
            context.queue.tenant = context.tenant
        context.bound = context.bound or b_id is not None
        if c_name is not None and c_name not in context.bound_names:
            context.bound_names.append(c_name)
        if c_id is not None and sizes_by_cluster.get(c_id):
            cluster = Cluster.from_db(
                db, ["id", "name", "kind", "connection"], [c_id, c_name, kind, _json(_CONNECTION, cluster_connection)]
            )
            context.clusters[c_id] = (cluster, sizes_by_cluster[c_id])
            pool_name, *fabric = row[20:]
            context.render_tables[c_id] = RenderTables(
                namespaces=_json(_NAMESPACES, namespaces) or [],
                slurm_account=slurm_account or "",
                taints=_json(_TAINTS, taints),
                fabric=NodePool(name=pool_name, **dict(zip(FABRIC_FIELDS, fabric, strict=True))).fabric_settings()
                if pool_name is not None
                else None,
            )
    return context
