"""The per-day rollup of usage records (UsageDay), rebuilt for exactly the (cluster, day) pairs a change touched.

Every change to usage records goes through metering or a rate change, and both call
`rebuild_days` in their own transaction, so the rollup equals the records' sums. A rebuild first
locks the periods involved, which serializes rebuilds of the same period (two clusters metering at
once, a rate change during metering) without a unique constraint over nullable keys.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate

from apps.chargeback.models import Period, UsageDay, UsageRecord

KEYS = ("period_id", "cluster_id", "tenant_id", "queue_id", "tier_id", "gpu_model_id", "rate_card_id")


def utc_day(at: datetime) -> date:
    return at.astimezone(UTC).date()


def touched(records) -> set[tuple[int, date]]:
    """(cluster id, UTC day) of each record (records are split at midnight: their start's day)."""
    return {(r.cluster_id, utc_day(r.start)) for r in records}


def rebuild_days(pairs: set[tuple[int, date]]) -> int:
    """Recompute the rollup rows of these (cluster, day) pairs from the records. Call inside a transaction."""
    if not pairs:
        return 0
    by_day: dict[date, set[int]] = defaultdict(set)
    for cluster_id, day in pairs:
        by_day[day].add(cluster_id)
    starts = {datetime(d.year, d.month, 1, tzinfo=UTC) for d in by_day}
    list(Period.objects.select_for_update().filter(start__in=starts).order_by("pk").values_list("pk", flat=True))
    rows = []
    for day, clusters in sorted(by_day.items()):
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        UsageDay.objects.filter(day=day, cluster_id__in=clusters).delete()
        sums = (
            UsageRecord.objects.filter(cluster_id__in=clusters, start__gte=start, start__lt=start + timedelta(days=1))
            .values(*KEYS)
            .annotate(gpu=Sum("gpu_seconds"), idle=Sum("idle_gpu_seconds"), used=Sum("used_gpu_seconds"), n=Count("id"))
            .order_by()
        )
        for row in sums:
            rows.append(
                UsageDay(
                    day=day,
                    gpu_seconds=row["gpu"],
                    idle_gpu_seconds=row["idle"] or Decimal(0),
                    used_gpu_seconds=row["used"] or Decimal(0),
                    records=row["n"],
                    **{key: row[key] for key in KEYS},
                )
            )
    UsageDay.objects.bulk_create(rows, batch_size=5000)
    return len(rows)


def rebuild_period(period: Period) -> int:
    """Every (cluster, day) of a period, from its records (a repair; normal changes rebuild what they touch)."""
    UsageDay.objects.filter(period=period).delete()
    return rebuild_days(days_of(UsageRecord.objects.filter(period=period)))


def days_of(records) -> set[tuple[int, date]]:
    """(cluster id, UTC day) pairs of a queryset of records, computed by the database."""
    return set(
        records.annotate(day=TruncDate("start", tzinfo=UTC)).values_list("cluster_id", "day").distinct().order_by()
    )
