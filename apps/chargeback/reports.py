"""What the chargeback pages chart: spend per day by tenant and GPU model, allocation against use, idle waste;
and what one workload has cost so far (its page).

Every figure is one grouped query over the period's per-day usage rollup (the top idle workloads and one
workload's cost: over its usage records) of the tenants the viewer may see.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import DecimalField, F, Max, Sum

from apps.chargeback.models import SECONDS_PER_HOUR, Credit, CreditState, Period, UsageDay, UsageRecord
from apps.chargeback.statements import money

_COST = Sum(F("gpu_seconds") * F("rate_card__rate"), output_field=DecimalField(max_digits=30, decimal_places=12))
_IDLE_COST = Sum(
    F("idle_gpu_seconds") * F("rate_card__rate"), output_field=DecimalField(max_digits=30, decimal_places=12)
)
TOP = 10


def _days(period: Period, tenant_ids: set[int] | None):
    rows = UsageDay.objects.filter(period=period, tenant__isnull=False)
    return rows if tenant_ids is None else rows.filter(tenant_id__in=tenant_ids)


def _records(period: Period, tenant_ids: set[int] | None):
    rows = UsageRecord.objects.filter(period=period, tenant__isnull=False)
    return rows if tenant_ids is None else rows.filter(tenant_id__in=tenant_ids)


def _amount(value) -> float:
    # Chart coordinates only; statements and exports keep Decimal.
    return float(money(Decimal(value or 0) / SECONDS_PER_HOUR))


def _hours(value) -> float:
    return float((Decimal(value or 0) / SECONDS_PER_HOUR).quantize(Decimal("0.01")))


def spend_by_day(period: Period, tenant_ids: set[int] | None, key: str) -> list[dict]:
    """Plotly bar traces: one per `key` value (tenant__slug or gpu_model__code), the top ones by spend."""
    rows = _days(period, tenant_ids).values("day", key).annotate(cost=_COST).order_by("day")
    series: dict[str, dict] = defaultdict(dict)
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        series[row[key] or "?"][row["day"].isoformat()] = _amount(row["cost"])
        totals[row[key] or "?"] += Decimal(row["cost"] or 0)
    top = sorted(totals, key=totals.get, reverse=True)[:TOP]
    return [{"type": "bar", "name": name, "x": list(series[name]), "y": list(series[name].values())} for name in top]


def allocation_vs_use(period: Period, tenant_ids: set[int] | None) -> list[dict]:
    rows = (
        _days(period, tenant_ids)
        .values("day")
        .annotate(allocated=Sum("gpu_seconds"), used=Sum("used_gpu_seconds"), idle=Sum("idle_gpu_seconds"))
        .order_by("day")
    )
    days = [r["day"].isoformat() for r in rows]
    return [
        {
            "type": "scatter",
            "mode": "lines+markers",  # a month's first day is one point: draw it
            "name": "allocated GPU-h",
            "x": days,
            "y": [_hours(r["allocated"]) for r in rows],
        },
        {
            "type": "scatter",
            "mode": "lines+markers",  # a month's first day is one point: draw it
            "name": "utilized GPU-h",
            "x": days,
            "y": [_hours(r["used"]) for r in rows],
        },
        {"type": "bar", "name": "idle GPU-h (< threshold)", "x": days, "y": [_hours(r["idle"]) for r in rows]},
    ]


def waste_by_tenant(period: Period, tenant_ids: set[int] | None) -> list[dict]:
    """Per tenant: GPU-hours, idle GPU-hours and idle cost, most wasteful first."""
    rows = (
        _days(period, tenant_ids)
        .values("tenant__slug")
        .annotate(gpu=Sum("gpu_seconds"), idle=Sum("idle_gpu_seconds"), cost=_COST, idle_cost=_IDLE_COST)
        .order_by("-idle_cost", "tenant__slug")
    )
    return [
        {
            "tenant": r["tenant__slug"],
            "gpu_hours": _hours(r["gpu"]),
            "idle_hours": _hours(r["idle"]),
            "idle_pct": round(100 * float(Decimal(r["idle"] or 0) / r["gpu"]), 1) if r["gpu"] else 0.0,
            "cost": money(Decimal(r["cost"] or 0) / SECONDS_PER_HOUR),
            "idle_cost": money(Decimal(r["idle_cost"] or 0) / SECONDS_PER_HOUR),
        }
        for r in rows
    ]


def top_idle_workloads(period: Period, tenant_ids: set[int] | None, limit: int = TOP) -> list[dict]:
    rows = (
        _records(period, tenant_ids)
        .filter(idle_gpu_seconds__gt=0)
        .values("backend_id", "workload_id", "tenant__slug", "gpu_model__code")
        .annotate(gpu=Sum("gpu_seconds"), idle=Sum("idle_gpu_seconds"), idle_cost=_IDLE_COST)
        .order_by("-idle_cost", "-idle")[:limit]
    )
    return [
        {
            "workload": r["backend_id"],
            "workload_id": r["workload_id"],
            "tenant": r["tenant__slug"],
            "gpu_model": r["gpu_model__code"],
            "gpu_hours": _hours(r["gpu"]),
            "idle_hours": _hours(r["idle"]),
            "idle_cost": money(Decimal(r["idle_cost"] or 0) / SECONDS_PER_HOUR),
        }
        for r in rows
    ]


@dataclass(frozen=True)
class WorkloadCost:
    """What one workload has cost so far: its metered GPU time priced by each record's rate, minus fault credits."""

    gpu_hours: Decimal
    amount: Decimal
    credited_gpu_hours: Decimal
    credited_amount: Decimal
    metered_until: datetime | None

    @property
    def total(self) -> Decimal:
        return self.amount - self.credited_amount


def _decimal_hours(gpu_seconds) -> Decimal:
    return (Decimal(gpu_seconds or 0) / SECONDS_PER_HOUR).quantize(Decimal("0.01"))


def workload_cost(workload_id: int) -> WorkloadCost | None:
    """The workload's cost across every period (None before anything is metered): two aggregate queries."""
    usage = UsageRecord.objects.filter(workload_id=workload_id).aggregate(
        gpu=Sum("gpu_seconds"), cost=_COST, until=Max("end")
    )
    settled = Credit.objects.filter(workload_id=workload_id, state=CreditState.SETTLED)
    credited = settled.aggregate(gpu=Sum("gpu_seconds"), cost=_COST)
    if usage["gpu"] is None and credited["gpu"] is None:
        return None
    return WorkloadCost(
        gpu_hours=_decimal_hours(usage["gpu"]),
        amount=money(Decimal(usage["cost"] or 0) / SECONDS_PER_HOUR),
        credited_gpu_hours=_decimal_hours(credited["gpu"]),
        credited_amount=money(Decimal(credited["cost"] or 0) / SECONDS_PER_HOUR),
        metered_until=usage["until"],
    )


def workload_cost_panel(workload) -> dict:
    """The cost panel of a workload's page (apps/workloads/panels.py): its cost so far and the currency."""
    return {"cost": workload_cost(workload.pk), "currency": settings.CHARGEBACK_CURRENCY}
