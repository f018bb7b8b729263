"""Statements: a period's usage and credits priced per (tenant, model, queue, tier, rate), rolled up the tree.

One GROUP BY over the period's per-day usage rollup (each row carries the rate card that prices it), one over
its settled credits, then each tenant's statement takes the lines of every tenant in its subtree
(materialized `path` prefix). A line's amount is its exact GPU-seconds × rate, rounded to the cent
once; a statement's totals are sums of its lines' amounts, so an export of the lines adds up to the
statement to the cent.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from decimal import ROUND_HALF_EVEN, Decimal

from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.accounts.models import Tenant
from apps.chargeback.models import (
    CENT,
    SECONDS_PER_HOUR,
    Credit,
    CreditState,
    LineKind,
    Period,
    RateCard,
    Statement,
    StatementLine,
)

HOUR_PLACES = Decimal("0.000001")
ZERO_HOURS = Decimal("0.000000")
ZERO_MONEY = Decimal("0.00")


@dataclass(slots=True)
class Line:
    """A computed statement line (a StatementLine once stored): a plain object, as thousands are built per close."""

    kind: str
    source_tenant_id: int
    gpu_model_id: int | None
    queue_id: int | None
    tier_id: int | None
    rate: Decimal | None
    gpu_hours: Decimal
    amount: Decimal
    idle_gpu_hours: Decimal = Decimal(0)
    idle_amount: Decimal = Decimal("0.00")
    incident_ref: str = ""
    incident_url: str = ""
    note: str = ""


def money(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_EVEN)


def hours(gpu_seconds: Decimal) -> Decimal:
    return (gpu_seconds / SECONDS_PER_HOUR).quantize(HOUR_PLACES, rounding=ROUND_HALF_EVEN)


def priced(gpu_seconds: Decimal, rate: Decimal | None) -> Decimal:
    return money(gpu_seconds * rate / SECONDS_PER_HOUR) if rate is not None else Decimal("0.00")


# The statement's one aggregate, over the per-day rollup of the usage records (rollup.py); the
# benchmark (bench/chargeback_bench.py) compares it with a bare GROUP BY over the records themselves.
_USAGE_SQL = """
SELECT tenant_id, gpu_model_id, queue_id, tier_id, rate_card_id, SUM(gpu_seconds), SUM(idle_gpu_seconds)
FROM chargeback_usageday
WHERE period_id = %s{tenant_filter}
GROUP BY tenant_id, gpu_model_id, queue_id, tier_id, rate_card_id
"""


def usage_groups(period: Period, tenant_ids: list[int] | None = None) -> list[tuple]:
    """(tenant, model, queue, tier, rate card, GPU-seconds, idle GPU-seconds) of the period, as Decimals."""
    params: list = [period.pk]
    tenant_filter = ""
    if tenant_ids is not None:
        if not tenant_ids:
            return []
        placeholders = ", ".join(["%s"] * len(tenant_ids))
        tenant_filter = f" AND tenant_id IN ({placeholders})"
        params += list(tenant_ids)
    with connection.cursor() as cursor:
        cursor.execute(_USAGE_SQL.format(tenant_filter=tenant_filter), params)
        rows = cursor.fetchall()
    # Unattributed usage (no tenant) is on no tenant's statement. SQLite (the demo) may hand back
    # floats for the sums: through str() they become the decimals they print as.
    if connection.vendor == "postgresql":
        return [row for row in rows if row[0] is not None]
    return [(*row[:5], Decimal(str(row[5])), Decimal(str(row[6]))) for row in rows if row[0] is not None]


def _lines_by_tenant(period: Period, tenant_ids: list[int] | None) -> dict[int, list[Line]]:
    groups = usage_groups(period, tenant_ids)
    rates = dict(RateCard.objects.filter(pk__in={g[4] for g in groups if g[4]}).values_list("id", "rate"))
    out: dict[int, list[Line]] = defaultdict(list)
    for tenant_id, model_id, queue_id, tier_id, card_id, gpu_seconds, idle_seconds in groups:
        rate = rates.get(card_id)
        out[tenant_id].append(
            Line(
                kind=LineKind.USAGE,
                source_tenant_id=tenant_id,
                gpu_model_id=model_id,
                queue_id=queue_id,
                tier_id=tier_id,
                rate=rate,
                gpu_hours=hours(gpu_seconds),
                amount=priced(gpu_seconds, rate),
                idle_gpu_hours=hours(idle_seconds) if idle_seconds else ZERO_HOURS,
                idle_amount=priced(idle_seconds, rate) if idle_seconds else ZERO_MONEY,
                note="" if rate is not None else "no rate card for this GPU model and tier",
            )
        )
    credits = Credit.objects.filter(period=period, state=CreditState.SETTLED).select_related("rate_card")
    if tenant_ids is not None:
        credits = credits.filter(tenant_id__in=tenant_ids)
    for credit in credits:
        rate = credit.rate_card.rate if credit.rate_card_id else None
        out[credit.tenant_id].append(
            Line(
                kind=LineKind.CREDIT,
                source_tenant_id=credit.tenant_id,
                gpu_model_id=credit.gpu_model_id,
                queue_id=credit.queue_id,
                tier_id=credit.tier_id,
                rate=rate,
                gpu_hours=-hours(credit.gpu_seconds),
                amount=-priced(credit.gpu_seconds, rate),
                incident_ref=credit.incident_ref,
                incident_url=credit.incident_url,
                note=credit.reason[:500],
            )
        )
    return out


def compute_statements(period: Period, tenants: list[Tenant] | None = None) -> list[Statement]:
    """Unsaved statements (with `.computed_lines`) of `tenants` (default: every tenant) for `period`.

    A tenant's statement holds its own lines and its subtenants'; computing for a subset reads only
    the usage of those tenants' subtrees.
    """
    everyone = list(Tenant.objects.only("id", "path", "slug", "name"))
    if tenants is None:
        tenants, scope_ids = everyone, None
    else:
        prefixes = [t.path for t in tenants]
        scope_ids = [t.pk for t in everyone if any(t.path.startswith(p) for p in prefixes)]
    own = _lines_by_tenant(period, scope_ids)
    path_of = {t.pk: t.path for t in everyone}
    # Each tenant's lines and subtotals go to its own statement and to each ancestor's: one walk up
    # the path per tenant, so the work grows with lines + tenants × depth, not lines × depth.
    subtree_lines: dict[int, list[Line]] = defaultdict(list)
    subtree_totals: dict[int, list[Decimal]] = {}
    for tenant_id, lines in own.items():
        totals = _totals(lines)
        for ancestor_id in (int(part) for part in path_of[tenant_id].strip("/").split("/") if part):
            subtree_lines[ancestor_id].extend(lines)
            if ancestor_id in subtree_totals:
                subtree_totals[ancestor_id] = [a + b for a, b in zip(subtree_totals[ancestor_id], totals, strict=True)]
            else:
                subtree_totals[ancestor_id] = list(totals)
    now = timezone.now()
    currency = settings.CHARGEBACK_CURRENCY
    empty = _totals([])
    out = []
    for tenant in tenants:
        gpu_hours, usage, credit_hours, credit, idle_hours, idle = subtree_totals.get(tenant.pk, empty)
        statement = Statement(
            period=period,
            tenant=tenant,
            currency=currency,
            gpu_hours=gpu_hours,
            usage_amount=usage,
            credit_gpu_hours=credit_hours,
            credit_amount=credit,
            idle_gpu_hours=idle_hours,
            idle_amount=idle,
            total=usage - credit,
            computed_at=now,
        )
        statement.computed_lines = subtree_lines.get(tenant.pk, [])
        out.append(statement)
    return out


def _totals(lines: list[Line]) -> list[Decimal]:
    """[GPU-hours, usage amount, credited GPU-hours, credit amount, idle GPU-hours, idle amount] of `lines`."""
    hours_, usage, credit_hours, credit, idle_hours, idle = (Decimal(0),) * 6
    for line in lines:
        if line.kind == LineKind.USAGE:
            hours_ += line.gpu_hours
            usage += line.amount
            idle_hours += line.idle_gpu_hours
            idle += line.idle_amount
        else:
            credit_hours -= line.gpu_hours
            credit -= line.amount
    return [hours_, usage, credit_hours, credit, idle_hours, idle]


def save_statements(period: Period, statements: list[Statement]) -> int:
    """Replace the period's stored statements with `statements` (inside the caller's transaction)."""
    Statement.objects.filter(period=period).delete()
    saved = Statement.objects.bulk_create(statements, batch_size=1000)
    lines = [
        StatementLine(statement=statement, **asdict(line))
        for statement, original in zip(saved, statements, strict=True)
        for line in original.computed_lines
    ]
    StatementLine.objects.bulk_create(lines, batch_size=5000)
    return len(saved)


def lines_of(statement: Statement) -> list[StatementLine | Line]:
    """The lines of a stored statement, or of a computed (draft) one."""
    computed = getattr(statement, "computed_lines", None)
    if computed is not None:
        return computed
    return list(statement.lines.select_related("source_tenant", "gpu_model", "queue", "tier"))
