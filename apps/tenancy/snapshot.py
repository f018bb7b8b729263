"""Build the admission engine's Snapshot from the database in a fixed number of queries.

The engine counts units of 1/SHARE_UNITS GPU (apps/backends/shares.py): claims are stored in units, quota rows
in whole GPUs (converted here), node capacity in whole GPUs (converted here). Capacity and the clusters each
queue is bound to are per cluster.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.db.models import Q, Sum

from apps.backends.shares import SHARE_UNITS
from apps.core.refcache import cached
from apps.fleet.models import Cluster, Node, NodeState
from apps.tenancy.admission import AT_USER_CAP, POOL, UNLIMITED, Held, QuotaState, Request, Snapshot, Tier
from apps.tenancy.models import Admission, AdmissionState, PriorityTier, QueueBinding, Quota
from apps.tenancy.reservations import Reservation

UNIT = SHARE_UNITS


def tier_rows() -> list[PriorityTier]:
    """Every priority tier (a few rows), from the per-process reference cache."""
    return cached("tiers", lambda: list(PriorityTier.objects.all()))


def tiers() -> dict[int, Tier]:
    return {t.pk: Tier(t.name, t.value, t.preemptible, t.may_borrow) for t in tier_rows()}


def _units(gpus: int | None) -> float:
    """A quota row's whole GPUs (None: unlimited) as units."""
    return UNLIMITED if gpus is None else gpus * UNIT


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
_HELD_FIELDS = (
    "id",
    "queue_id",
    "gpu_model__code",
    "gpu_units",
    "tier_id",
    "user",
    "borrowed_from",
    "admitted_at",
    "cluster_id",
    "ends_at",
)


def _quota_state(queue: int, code: str, g, borrow, lend, weight, per_user, used: int = 0, lent: int = 0):
    return QuotaState(
        queue,
        code,
        g * UNIT,
        _units(borrow),
        None if lend is None else lend * UNIT,
        weight,
        _units(per_user),
        used=used,
        lent=lent,
    )


def _read_quotas(snapshot: Snapshot, quota_rows, keep: set[int] = frozenset()) -> None:
    """Quota rows into the snapshot; queues in `keep` were read earlier and may already be changed."""
    for queue, code, model_name, g, borrow, lend, weight, per_user, path, slug, qname in quota_rows.values_list(
        *_QUOTA_FIELDS
    ):
        if queue in keep and (queue, code) in snapshot.quotas:
            continue
        snapshot.quotas[(queue, code)] = _quota_state(queue, code, g, borrow, lend, weight, per_user)
        snapshot.paths[queue] = path
        snapshot.names[queue] = f"{slug}/{qname}"
        snapshot.model_names[code] = model_name


def _read_clusters(snapshot: Snapshot, queues: set[int] | None = None) -> None:
    """Which clusters each queue is bound to, and the clusters' names (two small queries)."""
    bindings = QueueBinding.objects.all() if queues is None else QueueBinding.objects.filter(queue_id__in=queues)
    bound: dict[int, set[int]] = defaultdict(set)
    for queue, cluster in bindings.values_list("queue_id", "cluster_id"):
        bound[queue].add(cluster)
    snapshot.bound = {queue: frozenset(clusters) for queue, clusters in bound.items()}
    snapshot.cluster_names.update(cluster_names())


def cluster_names() -> dict[int, str]:
    return cached("cluster-names", lambda: dict(Cluster.objects.values_list("id", "name")))


def _borrowed(raw: dict | None) -> dict[int, int]:
    return {int(k): int(v) for k, v in (raw or {}).items()}


def _held(admitted, tier_map: dict[int, Tier]):
    """Admitted claims as engine holdings."""
    for pk, queue, code, units, tier_id, user, borrowed, admitted_at, cluster, ends_at in admitted.values_list(
        *_HELD_FIELDS
    ):
        yield Held(pk, queue, code, units, tier_map[tier_id], admitted_at, user, _borrowed(borrowed), cluster, ends_at)


def _hold(snapshot: Snapshot, held: Held) -> None:
    """Count an admitted claim into its queue's use, its lenders' lending and its cluster's pool use."""
    snapshot.held[held.id] = held
    quota = snapshot.quotas.get((held.queue, held.model))
    if quota is not None:
        quota.used += held.gpus
    for lender, n in held.borrowed_from.items():
        if lender == POOL:
            snapshot.pool_used[(held.cluster, held.model)] += n
        elif (lender, held.model) in snapshot.quotas:
            snapshot.quotas[(lender, held.model)].lent += n
    snapshot.user_used[(held.queue, held.model, held.user)] += held.gpus


def build_snapshot(with_capacity: bool = True) -> tuple[Snapshot, dict[int, Tier]]:
    """Every quota row, every admitted claim, and (`with_capacity`, for deciding) the bindings and the fleet's
    capacity per cluster: 4-7 queries. Without capacity (pages showing use, what-if) no cluster is known: the
    snapshot then treats every queue as sharing with every other."""
    tier_map = tiers()
    snapshot = Snapshot(quotas={}, paths={}, names={}, model_names={}, unit=UNIT)
    _read_quotas(snapshot, Quota.objects.all())
    if with_capacity:
        _read_clusters(snapshot)
    for held in _held(Admission.objects.filter(state=AdmissionState.ADMITTED), tier_map):
        _hold(snapshot, held)
    if with_capacity:
        for key, (free, total) in capacity_by_cluster().items():
            snapshot.free_capacity[key] = free
            snapshot.capacity_total[key] = total
    return snapshot, tier_map


def build_decision_snapshot(
    model: str, queue: int | None = None, *, lock_sql: str | None = None, tier_value: int = -(2**31)
) -> Snapshot:
    """What one decision on `model` needs, from aggregates: quota, use and lending, capacity, reservations.

    With `queue`, only that queue's row is read up front; every other queue (the possible lenders, the
    bindings, the unguaranteed pool's use) is read the first time the decision asks for lenders, and the
    admitted claims themselves only if it has to plan a reclaim or a reservation's spare. A decision within
    the guarantee reads a handful of rows. `lock_sql` (PostgreSQL, with `queue`) takes the admission lock first,
    in the same round trip as that read. Pending work of `tier_value` or above waiting in the queue goes first
    (or is passed by backfilling).
    """
    tier_map = tiers()
    snapshot = Snapshot(quotas={}, paths={}, names={}, model_names={}, unit=UNIT)
    snapshot.cluster_names.update(cluster_names())
    # Read before the lock: the figure is advisory and cached for seconds anyway; its re-read (an aggregate
    # over the fleet's nodes) must not make every other submission wait.
    for key, (free, total) in capacity_cached(model).items():
        snapshot.free_capacity[key] = free
        snapshot.capacity_total[key] = total
    if queue is not None:
        reclaims = _load_one_queue(snapshot, model, queue, lock_sql, tier_value)
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


def capacity_cached(model: str) -> dict[tuple[int, str], tuple[float, float]]:
    """(free, allocatable) units of one model per cluster, re-read at most every `ADMISSION_CAPACITY_CACHE_S`
    seconds per process.

    Physical capacity changes only when inventory is synced (each minute) or work starts and ends;
    a submission burst need not aggregate every node of the fleet on each request. Quota, which is
    what admission guarantees, is always read fresh. A cluster without nodes of the model is missing:
    its capacity is unknown, so it does not block (no fleet synced yet).
    """
    from django.conf import settings

    return cached(f"capacity:{model}", lambda: capacity_by_cluster(model), ttl=settings.ADMISSION_CAPACITY_CACHE_S)


def capacity_by_cluster(model: str | None = None) -> dict[tuple[int, str], tuple[float, float]]:
    """Per (cluster, model code): free units (allocatable minus allocated on ready, uncordoned nodes, as last
    synced) and allocatable units on those nodes (what the unguaranteed pool is measured against). Capacity is
    advisory; quota is what admission guarantees."""
    out: dict[tuple[int, str], tuple[float, float]] = {}
    # Every node of the model counts, so that a cluster whose nodes are all cordoned has 0 free, not "unknown".
    in_service = Q(state=NodeState.READY, unschedulable=False)
    for cluster, code, allocatable, allocated in (
        Node.objects.filter(gpu_model__isnull=False, **({"gpu_model__code": model} if model else {}))
        .exclude(state=NodeState.VANISHED)
        .values("cluster_id", "gpu_model__code")
        .annotate(
            a=Sum("gpu_allocatable", filter=in_service, default=0),
            b=Sum("gpu_allocated", filter=in_service, default=0),
        )
        .values_list("cluster_id", "gpu_model__code", "a", "b")
    ):
        allocatable = allocatable or 0
        out[(cluster, code)] = (max(allocatable - (allocated or 0), 0) * UNIT, allocatable * UNIT)
    return out


_PENDING_FIELDS = (
    "id",
    "queue_id",
    "gpu_model__code",
    "gpu_units",
    "gang",
    "tier_id",
    "user",
    "submitted_at",
    "cluster_id",
    "max_runtime_s",
    "name",
    "reserved_units",
    "expected_start",
    "decision",
    "reason",
    "reclaim_plan",
    "holds_cluster",
)


def pending_claims(tier_map: dict[int, Tier]) -> tuple[list[Request], dict[int, tuple]]:
    """Every pending claim as an engine Request, and what the last pass wrote on it (decision, reason, reclaim
    plan, reservation: (units, start, holds cluster)) so that a pass writes only what changed: one query."""
    requests, stored = [], {}
    for (
        pk,
        queue,
        code,
        units,
        gang,
        tier_id,
        user,
        submitted,
        cluster,
        runtime,
        name,
        reserved,
        start,
        decision,
        reason,
        plan,
        holds,
    ) in Admission.objects.filter(state=AdmissionState.PENDING).values_list(*_PENDING_FIELDS):
        requests.append(
            Request(
                queue,
                code,
                units,
                tier_map[tier_id],
                gang,
                user,
                pk,
                submitted,
                cluster,
                runtime,
                name,
                bool(reserved and start is not None),
            )
        )
        stored[pk] = (decision, reason, plan, (reserved, start, holds))
    return requests, stored


def pending_requests(tier_map: dict[int, Tier]) -> list[Request]:
    """Every pending claim as an engine Request, in one query."""
    return pending_claims(tier_map)[0]


# One queue's quota row for one model with its use, what others borrowed from it, whether any reclaim is pending
# on the model, how much pending work of at least the request's tier waits in the queue, and whether any
# reservation holds a cluster's GPUs of the model: one statement (a decision within the guarantee needs nothing
# else).
_ONE_QUEUE_SQL = (
    "SELECT qu.guaranteed, qu.borrow_limit, qu.lend_limit, qu.weight, qu.per_user_limit, t.path, t.slug, q.name, "
    "m.name, "
    "(SELECT SUM(a.gpu_units) FROM tenancy_admission a WHERE a.state = %s AND a.gpu_model_id = m.id "
    "AND a.queue_id = q.id), "
    # 'admitted' is spelled out: a parameter there would keep the (generic) plan off the partial index.
    "(SELECT SUM({lent}) FROM tenancy_admission a WHERE a.state = 'admitted' AND a.gpu_model_id = m.id "
    "AND NOT (a.borrowed_from = {empty}) AND {lent} > 0), "
    "(SELECT COUNT(*) FROM tenancy_admission a JOIN fleet_gpumodel am ON am.id = a.gpu_model_id "
    "WHERE a.state = %s AND a.decision = 'reclaim' AND am.code = %s), "
    "(SELECT COUNT(*) FROM tenancy_admission a JOIN tenancy_prioritytier pt ON pt.id = a.tier_id "
    "WHERE a.state = 'pending' AND a.queue_id = q.id AND a.gpu_model_id = m.id AND pt.value >= %s), "
    "(SELECT COUNT(*) FROM tenancy_admission a WHERE a.state = 'pending' AND a.expected_start IS NOT NULL "
    "AND a.gpu_model_id = m.id AND a.holds_cluster) "
    # The queue's and the model's names come back without a quota row too: a refusal names them.
    "FROM (SELECT 1 AS one) o "
    "LEFT JOIN tenancy_queue q ON q.id = %s "
    "LEFT JOIN tenancy_tenant t ON t.id = q.tenant_id "
    "LEFT JOIN fleet_gpumodel m ON m.code = %s "
    "LEFT JOIN tenancy_quota qu ON qu.queue_id = q.id AND qu.gpu_model_id = m.id"
)
# Units a claim borrowed from the queue (its `borrowed_from` maps lender queue ids to units), per database.
_LENT_FROM = {
    "postgresql": "COALESCE((a.borrowed_from ->> %s)::bigint, 0)",
    "sqlite": "COALESCE(CAST(json_extract(a.borrowed_from, '$.\"' || %s || '\"') AS INTEGER), 0)",
}


# An empty `borrowed_from` (the partial index `admission_borrowing` leaves those claims out).
_EMPTY = {"postgresql": "'{}'::jsonb", "sqlite": "'{}'"}


def _load_one_queue(
    snapshot: Snapshot, model: str, queue: int, lock_sql: str | None = None, tier_value: int = -(2**31)
) -> int:
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
    params += [AdmissionState.PENDING, model, tier_value, queue, model]
    with connection.cursor() as cursor:
        if lock_sql is None:
            cursor.execute(sql, params)
        else:
            with connection.cursor() as lock, connection.connection.pipeline():
                lock.execute(lock_sql)
                cursor.execute(sql, params)
        (g, borrow, lend, weight, per_user, path, slug, qname, model_name, used, lent, reclaims, waiting, held) = (
            cursor.fetchone()
        )
    snapshot._loaded_queues.add(queue)
    if qname is not None:
        snapshot.names[queue] = f"{slug}/{qname}"
    if model_name is not None:
        snapshot.model_names[model] = model_name
    if g is None:  # no quota row: the queue holds no guarantee of this model
        return reclaims
    snapshot.quotas[(queue, model)] = _quota_state(
        queue, model, g, borrow, lend, weight, per_user, used=int(used or 0), lent=int(lent or 0)
    )
    snapshot.paths[queue] = path
    if per_user is not None:
        for user, n in (
            Admission.objects.filter(state=AdmissionState.ADMITTED, gpu_model__code=model, queue_id=queue)
            .values("user")
            .annotate(n=Sum("gpu_units"))
            .values_list("user", "n")
        ):
            snapshot.user_used.setdefault((queue, model, user), n or 0)
    if waiting:
        _load_queue_reservation(snapshot, model, queue, tier_value)
    if held:
        _load_cluster_reservations(snapshot, model, queue)
    return reclaims


def _ends_by(model: str, when: datetime, **where) -> int:
    """Units of admitted claims of `model` (filtered by `where`) whose runtime limit ends by `when`."""
    total = Admission.objects.filter(
        state=AdmissionState.ADMITTED, gpu_model__code=model, ends_at__lte=when, **where
    ).aggregate(n=Sum("gpu_units"))["n"]
    return int(total or 0)


def _load_queue_reservation(snapshot: Snapshot, model: str, queue: int, tier_value: int) -> None:
    """Pending work of the request's tier or above waits in its queue: the new request goes behind it, or
    backfills in front of its reservation (apps/tenancy/reservations.py)."""
    head = (
        Admission.objects.filter(
            state=AdmissionState.PENDING, queue_id=queue, gpu_model__code=model, tier__value__gte=tier_value
        )
        .exclude(reason__startswith=AT_USER_CAP.split("%", 1)[0])  # waits for its own user's work: holds nothing
        .order_by("-reserved_units", "submitted_at", "id")
        .values_list("id", "name", "gpu_units", "reserved_units", "expected_start", "cluster_id")
        .first()
    )
    if head is None:
        return
    pk, name, units, reserved, start, cluster = head
    reservation = Reservation(pk, name, queue, model, cluster, units, start if reserved else None)
    if reservation.start is not None:
        quota = snapshot.quotas[(queue, model)]
        # What its queue's own work frees by the start, beyond the head's need (conservative: lenders left out).
        reservation.spare_queue = max(quota.free_in_guarantee + _ends_by(model, start, queue_id=queue) - units, 0)
        reservation.entitled = units <= quota.guaranteed
    snapshot.reservations[(queue, model)] = reservation


def _load_cluster_reservations(snapshot: Snapshot, model: str, queue: int) -> None:
    """The reservations holding a cluster's GPUs of `model` (one per cluster), with what is spare at their start."""
    for pk, name, rqueue, cluster, units, start, quota_units in Admission.objects.filter(
        holds_cluster=True,
        expected_start__isnull=False,
        gpu_model__code=model,
        state=AdmissionState.PENDING,
        queue__quotas__gpu_model__code=model,
    ).values_list("id", "name", "queue_id", "cluster_id", "gpu_units", "expected_start", "queue__quotas__guaranteed"):
        if rqueue == queue or start is None:
            continue
        free = snapshot.capacity(cluster, model)
        spare = free + _ends_by(model, start, cluster_id=cluster) - units if free != UNLIMITED else UNLIMITED
        entitled = quota_units is not None and units <= quota_units * UNIT
        reservation = Reservation(pk, name, rqueue, model, cluster, units, start, entitled, 0, max(spare, 0), True)
        snapshot.cluster_reservations[(cluster, model)] = reservation


# Run under the admission lock when a queue is past its guarantee; 'admitted' is spelled out so that the
# (generic) plans can use the indexes made for them: admission_state_model_units covers the first (queue and
# units included), the partial admission_borrowing holds only the claims the second and third read.
_USE_BY_QUEUE_SQL = (
    "SELECT a.queue_id, SUM(a.gpu_units) FROM tenancy_admission a WHERE a.state = 'admitted' "
    "AND a.gpu_model_id = (SELECT id FROM fleet_gpumodel WHERE code = %s) GROUP BY a.queue_id"
)
_LENT_BY_QUEUE_SQL = (
    "SELECT b.key::bigint, a.cluster_id, SUM(b.value::bigint) FROM tenancy_admission a, "
    "jsonb_each_text(a.borrowed_from) b "
    "WHERE a.state = 'admitted' AND NOT (a.borrowed_from = '{}'::jsonb) "
    "AND a.gpu_model_id = (SELECT id FROM fleet_gpumodel WHERE code = %s) GROUP BY b.key, a.cluster_id"
)


def _load_quota_use(snapshot: Snapshot, model: str, queue: int | None) -> None:
    """Quota rows of `model` (one queue's, or all) with what their admitted work uses and lends; with all,
    also which clusters each queue is bound to and what the unguaranteed pool lent on each cluster."""
    from django.db import connection

    quota_rows = Quota.objects.filter(gpu_model__code=model)
    admitted = Admission.objects.filter(state=AdmissionState.ADMITTED, gpu_model__code=model)
    if queue is not None:
        quota_rows = quota_rows.filter(queue_id=queue)
    _read_quotas(snapshot, quota_rows, keep=snapshot._loaded_queues if queue is None else frozenset())
    if queue is None:  # every queue's use: one pass over the model's admitted claims (the decision's lenders)
        _read_clusters(snapshot, {q for (q, m) in snapshot.quotas if m == model})
        # Queues whose head holds a reservation lend nothing (apps/tenancy/reservations.py).
        snapshot.reserved_lenders.update(
            (q, model)
            for q in Admission.objects.filter(
                state=AdmissionState.PENDING, expected_start__isnull=False, gpu_model__code=model
            ).values_list("queue_id", flat=True)
        )
        with connection.cursor() as cursor:
            cursor.execute(_USE_BY_QUEUE_SQL, [model])
            used_rows = cursor.fetchall()
    else:
        used_rows = (
            admitted.filter(queue_id=queue).values("queue_id").annotate(n=Sum("gpu_units")).values_list("queue_id", "n")
        )
    for qid, used in used_rows:
        if (qid, model) in snapshot.quotas and (queue is not None or qid not in snapshot._loaded_queues):
            snapshot.quotas[(qid, model)].used = int(used or 0)
    lent_map: dict[int, int] = defaultdict(int)
    if connection.vendor == "postgresql" and queue is None:
        with connection.cursor() as cursor:
            cursor.execute(_LENT_BY_QUEUE_SQL, [model])
            for lender, cluster, n in cursor.fetchall():
                if lender == POOL:
                    snapshot.pool_used[(cluster, model)] = int(n or 0)
                else:
                    lent_map[lender] += int(n or 0)
    else:  # one queue (claims that borrowed from it), or the demo's SQLite: fold in Python
        rows = (
            admitted.filter(borrowed_from__has_key=str(queue))
            if queue is not None
            else admitted.exclude(borrowed_from={})
        )
        for borrowed, cluster in rows.values_list("borrowed_from", "cluster_id"):
            for lender, value in _borrowed(borrowed).items():
                if queue is None and lender == POOL:
                    snapshot.pool_used[(cluster, model)] += value
                elif queue is None or lender == queue:
                    lent_map[lender] += value
    for lender, n in lent_map.items():
        if (lender, model) in snapshot.quotas and (queue is not None or lender not in snapshot._loaded_queues):
            snapshot.quotas[(lender, model)].lent = n
    if queue is not None:
        snapshot._loaded_queues.add(queue)
    if any(q.per_user_limit != UNLIMITED for q in snapshot.quotas.values()):
        user_rows = admitted.filter(queue_id=queue) if queue is not None else admitted
        for qid, user, used in (
            user_rows.values("queue_id", "user").annotate(n=Sum("gpu_units")).values_list("queue_id", "user", "n")
        ):
            snapshot.user_used.setdefault((qid, model, user), used or 0)
