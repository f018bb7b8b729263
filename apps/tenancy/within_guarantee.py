"""A claim within its queue's guarantee, decided by PostgreSQL in the statement that writes it.

Most submissions fit their queue's guarantee. For them the admission engine (apps/tenancy/admission.py) reads the
queue's use under the admission lock and answers ADMIT, "within guarantee (used of guaranteed)"; deciding that in
Python holds the lock while Python runs, and under load while the holder waits for a core. Here the same decision
is a guard in SQL: the claim goes in by `INSERT … SELECT … FROM` the guard (apps/core/inserts.py,
`insert_rows_if_locked`), with the workload's other rows, in one statement sent with the lock and the COMMIT. When
the guard finds no row, nothing is written and the caller decides with the engine as before.

The guard admits exactly when the engine would admit within the guarantee on that one cluster, with the engine's
reason, in the same share units (apps/backends/shares.py: quota rows in whole GPUs times SHARE_UNITS, claims in
units), and refuses in a few cases where the engine's answer could differ in a way it does not compute, leaving
them to the engine:

* the queue's use + the claim ≤ its guarantee less what it has lent (the engine's `free_in_guarantee`);
* the per-user cap, when the quota row has one (`need` within it, and the user's use + `need`);
* no pending work of the claim's tier or above waits in the queue for the model (it would go first, or hold a
  reservation the claim may only backfill);
* no other queue's reservation holds the cluster's GPUs of the model (a claim that ends before it gets a reason
  that says so);
* the reason's used share reads as a whole number or a fraction of at most 100ths ("6 3/7"; the engine writes
  the rest as decimals, rounded through a float);
* outside SQL, before the lock: one candidate cluster (several are compared by placement), a share of at least
  one unit, and the cluster not short of free GPUs by the cached capacity figure the engine reads too.

tests/tenancy/test_within_guarantee.py holds the guard to the engine's decision over generated queues, both ways.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from django.db import connection
from django.utils import timezone

from apps.backends.shares import SHARE_UNITS, to_units
from apps.core.inserts import Guard
from apps.fleet.models import Cluster, GpuModel
from apps.tenancy.admission import WITHIN_GUARANTEE, Decision
from apps.tenancy.models import Admission, AdmissionState, PriorityTier, Queue
from apps.tenancy.snapshot import capacity_cached

U = SHARE_UNITS


def _share_text(v: str) -> str:
    """SQL for `format_share(v, SHARE_UNITS)` of a non-negative bigint expression `v` whose fraction has a
    denominator of at most 100 (the guard checks that): "16", "3/7", "6 3/7"."""
    rest, divisor = f"mod({v}, {U})", f"gcd(mod({v}, {U}), {U})"
    return (
        f"CASE WHEN {rest} = 0 THEN ({v} / {U})::text "
        f"ELSE CASE WHEN {v} >= {U} THEN ({v} / {U})::text || ' ' ELSE '' END "
        f"|| ({rest} / {divisor})::text || '/' || ({U} / {divisor})::text END"
    )


# The sums are bigint again (SUM of bigint is numeric, whose "/" is not integer division).
# The lent sum and the use sum are the engine's own (apps/tenancy/snapshot.py, _ONE_QUEUE_SQL), over the same
# indexes; 'admitted' and 'pending' are spelled out for the partial indexes. "user" is quoted: a reserved word.
_LENT = "COALESCE((a.borrowed_from ->> p.queue_id::text)::bigint, 0)"
_GUARD_SQL = (
    f"SELECT format(p.template, {_share_text('s.after')}, qu.guaranteed) AS reason, p.now, "  # noqa: S608
    "p.now + make_interval(secs => p.runtime) AS ends_at "
    "FROM (SELECT %s::bigint AS queue_id, %s::bigint AS model_id, %s::bigint AS cluster_id, %s::bigint AS need, "
    "%s::text AS username, %s::integer AS tier_value, %s::double precision AS runtime, %s::text AS template, "
    "%s::timestamptz AS now) p "
    "JOIN tenancy_quota qu ON qu.queue_id = p.queue_id AND qu.gpu_model_id = p.model_id "
    "CROSS JOIN LATERAL (SELECT COALESCE(SUM(a.gpu_units), 0)::bigint AS used FROM tenancy_admission a "
    "WHERE a.state = 'admitted' AND a.queue_id = p.queue_id AND a.gpu_model_id = p.model_id) u "
    f"CROSS JOIN LATERAL (SELECT COALESCE(SUM({_LENT}), 0)::bigint AS lent FROM tenancy_admission a "
    "WHERE a.state = 'admitted' AND a.gpu_model_id = p.model_id AND NOT (a.borrowed_from = '{}'::jsonb) "
    f"AND {_LENT} > 0) l "
    f"CROSS JOIN LATERAL (SELECT qu.guaranteed::bigint * {U} AS g, "
    f"LEAST(u.used, qu.guaranteed::bigint * {U}) + p.need AS after) s "
    # Within the guarantee, less what others hold of it (free_in_guarantee).
    "WHERE s.after + l.lent <= s.g "
    f"AND (mod(s.after, {U}) = 0 OR {U} / gcd(mod(s.after, {U}), {U}) <= 100) "
    # The per-user cap (a CASE: the user's sum is read only for a quota row that has one).
    f"AND CASE WHEN qu.per_user_limit IS NULL THEN TRUE ELSE p.need <= qu.per_user_limit::bigint * {U} "
    "AND (p.username = '' OR p.need + (SELECT COALESCE(SUM(a.gpu_units), 0)::bigint FROM tenancy_admission a "
    "WHERE a.state = 'admitted' AND a.queue_id = p.queue_id AND a.gpu_model_id = p.model_id "
    f'AND a."user" = p.username) <= qu.per_user_limit::bigint * {U}) END '
    "AND NOT EXISTS (SELECT 1 FROM tenancy_admission a JOIN tenancy_prioritytier pt ON pt.id = a.tier_id "
    "WHERE a.state = 'pending' AND a.queue_id = p.queue_id AND a.gpu_model_id = p.model_id "
    "AND pt.value >= p.tier_value) "
    "AND NOT EXISTS (SELECT 1 FROM tenancy_admission a WHERE a.state = 'pending' AND a.expected_start IS NOT NULL "
    "AND a.gpu_model_id = p.model_id AND a.cluster_id = p.cluster_id AND a.holds_cluster "
    "AND a.queue_id <> p.queue_id)"
)
_COLUMNS = ("reason", "now", "ends_at")
# The engine's reason as PostgreSQL's format() template: "within guarantee (%1$s of %2$s)".
_TEMPLATE = (
    (WITHIN_GUARANTEE % {"used": "\x01", "guaranteed": "\x02"}).replace("%", "%%").replace("\x01", "%1$s")
).replace("\x02", "%2$s")
# Where the claim's decided values come from in the guard's row (`insert_rows_if_locked`'s `computed`).
CLAIM_COLUMNS = {"reason": "reason", "submitted_at": "now", "admitted_at": "now", "ends_at": "ends_at"}


@dataclass
class WithinGuarantee:
    """A claim ready to be admitted within its queue's guarantee if `guard` holds under the admission lock. Its
    `CLAIM_COLUMNS` are filled from the guard's row by the statement that inserts it."""

    claim: Admission
    guard: Guard


def within_guarantee(
    *,
    name: str,
    queue: Queue,
    gpu_model: GpuModel,
    gpus: int | Fraction,
    tier: PriorityTier,
    user: str,
    cluster: Cluster,
    max_runtime_s: int | None = None,
) -> WithinGuarantee | None:
    """The claim `decide_claim` would admit within the guarantee on `cluster` (the one candidate), if the guard
    finds it does, with that guard; None where only the engine decides: not PostgreSQL, no share to claim, or the
    cluster short of free GPUs by the cached figure (read before the lock, as the engine's decision reads it)."""
    if connection.vendor != "postgresql" or not isinstance(gpus, int | Fraction) or isinstance(gpus, bool):
        return None
    units = to_units(gpus) if gpus > 0 else 0
    if units <= 0:
        return None  # the engine refuses it, naming the field
    free = capacity_cached(gpu_model.code).get((cluster.pk, gpu_model.code))
    if free is not None and units > free[0]:
        return None
    claim = Admission(
        name=name,
        queue=queue,
        gpu_model=gpu_model,
        cluster=cluster,
        gpu_units=units,
        gang=1,
        tier=tier,
        user=user,
        max_runtime_s=max_runtime_s,
        state=AdmissionState.ADMITTED,
        decision=Decision.ADMIT,
        borrowed_from={},
        reclaim_plan=[],
    )
    # The decision's time is the console's clock (`timezone.now`, as the engine's), read as the statement is built.
    now = timezone.now()
    params = (queue.pk, gpu_model.pk, cluster.pk, units, user, tier.value, max_runtime_s, _TEMPLATE, now)
    return WithinGuarantee(claim, Guard(_GUARD_SQL, params, _COLUMNS))
