"""Build the admission engine's Snapshot from the database in a fixed number of queries."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Sum

from apps.core.refcache import cached
from apps.fleet.models import Node, NodeState
from apps.tenancy.admission import UNLIMITED, Held, QuotaState, Request, Snapshot, Tier
from apps.tenancy.models import Admission, AdmissionState, PriorityTier, Quota


def tier_rows() -> list[PriorityTier]:
    """Every priority tier (a few rows), from the per-process reference cache."""
    return cached("tiers", lambda: list(PriorityTier.objects.all()))


def tiers() -> dict[int, Tier]:
    return {t.pk: Tier(t.name, t.value, t.preemptible, t.may_borrow) for t in tier_rows()}


_QUOTA_FIELDS = (
    "queue_id",
    "gpu_model__code",
    "gpu_model__name",
    "guaranteed",
    "borrow_limit",
    "lend_limit",
    "weight",
    "per_user_limit",
    "queue__tenant__path",
    "queue__tenant__slug",
    "queue__name",
)
_HELD_FIELDS = ("id", "queue_id", "gpu_model__code", "gpus", "tier_id", "user", "borrowed_from", "admitted_at")


def _read_quotas(snapshot: Snapshot, quota_rows, keep: set[int] = frozenset()) -> None:
    """Quota rows into the snapshot; queues in `keep` were read earlier and may already be changed."""
    for queue, code, model_name, g, borrow, lend, weight, per_user, path, slug, qname in quota_rows.values_list(
        *_QUOTA_FIELDS
    ):
        if queue in keep and (queue, code) in snapshot.quotas:
            continue
        snapshot.quotas[(queue, code)] = QuotaState(
            queue,
            code,
            g,
            UNLIMITED if borrow is None else borrow,
            lend,
            weight,
            UNLIMITED if per_user is None else per_user,
        )
        snapshot.paths[queue] = path
        snapshot.names[queue] = f"{slug}/{qname}"
        snapshot.model_names[code] = model_name


def _held(admitted, tier_map: dict[int, Tier]):
    """Admitted claims as engine holdings."""
    for pk, queue, code, gpus, tier_id, user, borrowed, admitted_at in admitted.values_list(*_HELD_FIELDS):
        yield Held(
            pk,
            queue,
            code,
            gpus,
            tier_map[tier_id],
            admitted_at,
            user,
            {int(k): int(v) for k, v in (borrowed or {}).items()},
        )


def build_snapshot(with_capacity: bool = True) -> tuple[Snapshot, dict[int, Tier]]:
    """Every quota row, every admitted claim, and the fleet's free GPUs per model: 4-5 queries in all."""
    tier_map = tiers()
    snapshot = Snapshot(quotas={}, paths={}, names={}, model_names={})
    _read_quotas(snapshot, Quota.objects.all())
    for held in _held(Admission.objects.filter(state=AdmissionState.ADMITTED), tier_map):
        snapshot.held[held.id] = held
        quota = snapshot.quotas.get((held.queue, held.model))
        if quota is not None:
            quota.used += held.gpus
        for lender, n in held.borrowed_from.items():
            if (lender, held.model) in snapshot.quotas:
                snapshot.quotas[(lender, held.model)].lent += n
        snapshot.user_used[(held.queue, held.model, held.user)] += held.gpus
    if with_capacity:
        snapshot.free_capacity.update(free_capacity())
    return snapshot, tier_map


def build_decision_snapshot(model: str, queue: int | None = None, *, lock_sql: str | None = None) -> Snapshot:
    """What one decision on `model` needs, from aggregates: quota, use and lending, capacity.

    With `queue`, only that queue's row is read up front; every other queue (the possible lenders)
    is read the first time the decision asks for lenders, and the admitted claims themselves only
    if it has to plan a reclaim. A decision within the guarantee reads a handful of rows.
    `lock_sql` (PostgreSQL, with `queue`) takes the admission lock first, in the same round trip as that read.
    """
    tier_map = tiers()
    snapshot = Snapshot(quotas={}, paths={}, names={}, model_names={})
    # Read before the lock: the figure is advisory and cached for seconds anyway; its re-read (an aggregate
    # over the fleet's nodes) must not make every other submission wait.
    snapshot.free_capacity.update(free_capacity_cached(model))
    if queue is not None:
        reclaims = _load_one_queue(snapshot, model, queue, lock_sql)
        snapshot.load_lenders = lambda snap: _load_quota_use(snap, model, None)
    else:
        _load_quota_use(snapshot, model, None)
        reclaims = 1
    if reclaims:
        snapshot.reclaiming.update(
            (reclaimer, model)
            for reclaimer in Admission.objects.filter(
                state=AdmissionState.PENDING, decision="reclaim", gpu_model__code=model
            ).values_list("queue_id", flat=True)
        )

    def load_held(snap: Snapshot) -> None:  # only a reclaim plan needs these: build the query only then
        admitted = Admission.objects.filter(state=AdmissionState.ADMITTED, gpu_model__code=model)
        snap.held.update((held.id, held) for held in _held(admitted, tier_map))

    snapshot.load_held = load_held
    return snapshot


def free_capacity_cached(model: str) -> dict[str, float]:
    """Free GPUs of one model, re-read at most every `ADMISSION_CAPACITY_CACHE_S` seconds per process.

    Physical capacity changes only when inventory is synced (each minute) or work starts and ends;
    a submission burst need not aggregate every node of the fleet on each request. Quota, which is
    what admission guarantees, is always read fresh.
    """
    from django.conf import settings

    # No nodes of the model at all: capacity unknown (no fleet synced yet), so it does not block.
    free = cached(
        f"free-capacity:{model}", lambda: free_capacity(model).get(model), ttl=settings.ADMISSION_CAPACITY_CACHE_S
    )
    return {} if free is None else {model: free}


def free_capacity(model: str | None = None) -> dict[str, float]:
    """Free GPUs per model code on ready, uncordoned nodes, as last synced (capacity is advisory; quota is
    what admission guarantees)."""
    free: dict[str, float] = defaultdict(float)
    for code, allocatable, allocated in (
        Node.objects.filter(
            state=NodeState.READY,
            unschedulable=False,
            gpu_model__isnull=False,
            **({"gpu_model__code": model} if model else {}),
        )
        .values("gpu_model__code")
        .annotate(a=Sum("gpu_allocatable"), b=Sum("gpu_allocated"))
        .values_list("gpu_model__code", "a", "b")
    ):
        free[code] = max((allocatable or 0) - (allocated or 0), 0)
    return dict(free)


def pending_requests(tier_map: dict[int, Tier]) -> list[Request]:
    """Every pending claim as an engine Request, in one query."""
    return [
        Request(queue, code, gpus, tier_map[tier_id], gang, user, pk, submitted)
        for pk, queue, code, gpus, gang, tier_id, user, submitted in Admission.objects.filter(
            state=AdmissionState.PENDING
        ).values_list("id", "queue_id", "gpu_model__code", "gpus", "gang", "tier_id", "user", "submitted_at")
    ]


# One queue's quota row for one model with its use, what others borrowed from it, and whether any
# reclaim is pending on the model: one statement (a decision within the guarantee needs nothing else).
_ONE_QUEUE_SQL = (
    "SELECT qu.guaranteed, qu.borrow_limit, qu.lend_limit, qu.weight, qu.per_user_limit, t.path, t.slug, q.name, "
    "m.name, "
    "(SELECT SUM(a.gpus) FROM tenancy_admission a WHERE a.state = %s AND a.gpu_model_id = m.id AND a.queue_id = q.id), "
    # 'admitted' is spelled out: a parameter there would keep the (generic) plan off the partial index.
    "(SELECT SUM({lent}) FROM tenancy_admission a WHERE a.state = 'admitted' AND a.gpu_model_id = m.id "
    "AND NOT (a.borrowed_from = {empty}) AND {lent} > 0), "
    "(SELECT COUNT(*) FROM tenancy_admission a JOIN fleet_gpumodel am ON am.id = a.gpu_model_id "
    "WHERE a.state = %s AND a.decision = 'reclaim' AND am.code = %s) "
    "FROM (SELECT 1 AS one) o "
    "LEFT JOIN tenancy_quota qu ON qu.queue_id = %s "
    "AND qu.gpu_model_id = (SELECT id FROM fleet_gpumodel WHERE code = %s) "
    "LEFT JOIN tenancy_queue q ON q.id = qu.queue_id "
    "LEFT JOIN tenancy_tenant t ON t.id = q.tenant_id "
    "LEFT JOIN fleet_gpumodel m ON m.id = qu.gpu_model_id"
)
# GPUs a claim borrowed from the queue (its `borrowed_from` maps lender queue ids to GPUs), per database.
_LENT_FROM = {
    "postgresql": "COALESCE((a.borrowed_from ->> %s)::int, 0)",
    "sqlite": "COALESCE(CAST(json_extract(a.borrowed_from, '$.\"' || %s || '\"') AS INTEGER), 0)",
}


# An empty `borrowed_from` (the partial index `admission_borrowing` leaves those claims out).
_EMPTY = {"postgresql": "'{}'::jsonb", "sqlite": "'{}'"}


def _load_one_queue(snapshot: Snapshot, model: str, queue: int, lock_sql: str | None = None) -> int:
    """`queue`'s quota row of `model` with its use and lending, in one statement; returns the pending reclaims.

    With `lock_sql`, that lock statement and the read go to PostgreSQL together (psycopg's pipeline mode:
    one round trip with the transaction's BEGIN). They stay two statements, so the read takes its snapshot
    after the lock is granted and sees every decision committed before it. A submission makes one round
    trip less, and holds the lock for one less.
    """
    from django.db import connection

    key = str(queue)
    sql = _ONE_QUEUE_SQL.format(lent=_LENT_FROM[connection.vendor], empty=_EMPTY[connection.vendor])
    params = [AdmissionState.ADMITTED, key, key]
    params += [AdmissionState.PENDING, model, queue, model]
    with connection.cursor() as cursor:
        if lock_sql is None:
            cursor.execute(sql, params)
        else:
            with connection.cursor() as lock, connection.connection.pipeline():
                lock.execute(lock_sql)
                cursor.execute(sql, params)
        g, borrow, lend, weight, per_user, path, slug, qname, model_name, used, lent, reclaims = cursor.fetchone()
    snapshot._loaded_queues.add(queue)
    if g is None:  # no quota row: the queue holds no guarantee of this model
        return reclaims
    snapshot.quotas[(queue, model)] = QuotaState(
        queue,
        model,
        g,
        UNLIMITED if borrow is None else borrow,
        lend,
        weight,
        UNLIMITED if per_user is None else per_user,
        used=int(used or 0),
        lent=int(lent or 0),
    )
    snapshot.paths[queue] = path
    snapshot.names[queue] = f"{slug}/{qname}"
    snapshot.model_names[model] = model_name
    if per_user is not None:
        for user, n in (
            Admission.objects.filter(state=AdmissionState.ADMITTED, gpu_model__code=model, queue_id=queue)
            .values("user")
            .annotate(n=Sum("gpus"))
            .values_list("user", "n")
        ):
            snapshot.user_used.setdefault((queue, model, user), n or 0)
    return reclaims


# Run under the admission lock when a queue is past its guarantee; 'admitted' is spelled out so that the
# (generic) plans can use the indexes made for them: admission_state_model covers the first (queue and
# GPUs included), the partial admission_borrowing holds only the claims the second reads.
_USE_BY_QUEUE_SQL = (
    "SELECT a.queue_id, SUM(a.gpus) FROM tenancy_admission a WHERE a.state = 'admitted' "
    "AND a.gpu_model_id = (SELECT id FROM fleet_gpumodel WHERE code = %s) GROUP BY a.queue_id"
)
_LENT_BY_QUEUE_SQL = (
    "SELECT b.key::bigint, SUM(b.value::int) FROM tenancy_admission a, jsonb_each_text(a.borrowed_from) b "
    "WHERE a.state = 'admitted' AND NOT (a.borrowed_from = '{}'::jsonb) "
    "AND a.gpu_model_id = (SELECT id FROM fleet_gpumodel WHERE code = %s) GROUP BY b.key"
)


def _load_quota_use(snapshot: Snapshot, model: str, queue: int | None) -> None:
    """Quota rows of `model` (one queue's, or all) with what their admitted work uses and lends."""
    from django.db import connection

    quota_rows = Quota.objects.filter(gpu_model__code=model)
    admitted = Admission.objects.filter(state=AdmissionState.ADMITTED, gpu_model__code=model)
    if queue is not None:
        quota_rows = quota_rows.filter(queue_id=queue)
    _read_quotas(snapshot, quota_rows, keep=snapshot._loaded_queues if queue is None else frozenset())
    if queue is None:  # every queue's use: one pass over the model's admitted claims (the decision's lenders)
        with connection.cursor() as cursor:
            cursor.execute(_USE_BY_QUEUE_SQL, [model])
            used_rows = cursor.fetchall()
    else:
        used_rows = (
            admitted.filter(queue_id=queue).values("queue_id").annotate(n=Sum("gpus")).values_list("queue_id", "n")
        )
    for qid, used in used_rows:
        if (qid, model) in snapshot.quotas and (queue is not None or qid not in snapshot._loaded_queues):
            snapshot.quotas[(qid, model)].used = used or 0
    if connection.vendor == "postgresql" and queue is None:
        with connection.cursor() as cursor:
            cursor.execute(_LENT_BY_QUEUE_SQL, [model])
            lent = cursor.fetchall()
    else:  # one queue (claims that borrowed from it), or the demo's SQLite: fold in Python
        rows = (
            admitted.filter(borrowed_from__has_key=str(queue))
            if queue is not None
            else admitted.exclude(borrowed_from={})
        )
        lent_map: dict[int, int] = defaultdict(int)
        for borrowed in rows.values_list("borrowed_from", flat=True):
            for key, value in (borrowed or {}).items():
                if queue is None or int(key) == queue:
                    lent_map[int(key)] += int(value)
        lent = list(lent_map.items())
    for lender, n in lent:
        if (lender, model) in snapshot.quotas and (queue is not None or lender not in snapshot._loaded_queues):
            snapshot.quotas[(lender, model)].lent = int(n or 0)
    if queue is not None:
        snapshot._loaded_queues.add(queue)
    if any(q.per_user_limit != UNLIMITED for q in snapshot.quotas.values()):
        user_rows = admitted.filter(queue_id=queue) if queue is not None else admitted
        for qid, user, used in (
            user_rows.values("queue_id", "user").annotate(n=Sum("gpus")).values_list("queue_id", "user", "n")
        ):
            snapshot.user_used.setdefault((qid, model, user), used or 0)
