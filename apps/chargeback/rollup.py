"""The per-day rollup of usage records (UsageDay), rebuilt for exactly the (cluster, day) pairs a change touched.

Every change to usage records goes through metering (which adds its new records: `add_to_rollup`)
or a rate change (which rebuilds the days it repriced: `rebuild_days`), each in its own
transaction, so the rollup equals the records' sums. A rebuild first
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
from apps.core.bulk import bulk_update_fast

KEYS = ("period_id", "cluster_id", "tenant_id", "queue_id", "tier_id", "gpu_model_id", "rate_card_id")


def utc_day(at: datetime) -> date:
    return at.astimezone(UTC).date()


def rebuild_days(pairs: set[tuple[int, date]]) -> int:
    """Recompute the rollup rows of these (cluster, day) pairs from the records. Call inside a transaction."""
    if not pairs:
        return 0
    by_day: dict[date, set[int]] = defaultdict(set)
    for cluster_id, day in pairs:
        by_day[day].add(cluster_id)
    _lock_periods(set(by_day))
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


def add_to_rollup(records: list[UsageRecord]) -> int:
    """Add newly inserted records to the rollup (metering's path: work in proportion to the new records
    and the touched days' rollup rows, not to the day's records). Call inside a transaction."""
    if not records:
        return 0
    sums: dict[tuple, list] = {}
    for r in records:
        acc = sums.setdefault(
            (utc_day(r.start), *(getattr(r, k) for k in KEYS)), [Decimal(0), Decimal(0), Decimal(0), 0]
        )
        acc[0] += r.gpu_seconds
        acc[1] += r.idle_gpu_seconds or 0
        acc[2] += r.used_gpu_seconds or 0
        acc[3] += 1
    days, clusters = {key[0] for key in sums}, {key[2] for key in sums}
    _lock_periods(days)
    existing = {
        (row.day, *(getattr(row, k) for k in KEYS)): row
        for row in UsageDay.objects.filter(cluster_id__in=clusters, day__in=days)
    }
    changed, new = [], []
    for key, (gpu, idle, used, count) in sums.items():
        row = existing.get(key)
        if row is None:
            day, *ids = key
            fields = dict(zip(KEYS, ids, strict=True))
            new.append(
                UsageDay(
                    day=day, gpu_seconds=gpu, idle_gpu_seconds=idle, used_gpu_seconds=used, records=count, **fields
                )
            )
        else:
            row.gpu_seconds += gpu
            row.idle_gpu_seconds += idle
            row.used_gpu_seconds += used
            row.records += count
            changed.append(row)
    bulk_update_fast(UsageDay, changed, ["gpu_seconds", "idle_gpu_seconds", "used_gpu_seconds", "records"])
    UsageDay.objects.bulk_create(new, batch_size=5000)
    return len(changed) + len(new)


def _lock_periods(days: set[date]) -> None:
    # Rebuilds and additions of one period take its row first, so they never interleave.
    starts = {datetime(d.year, d.month, 1, tzinfo=UTC) for d in days}
    list(Period.objects.select_for_update().filter(start__in=starts).order_by("pk").values_list("pk", flat=True))


def rebuild_period(period: Period) -> int:
    """Every (cluster, day) of a period, from its records (a repair; normal changes rebuild what they touch)."""
    UsageDay.objects.filter(period=period).delete()
    return rebuild_days(days_of(UsageRecord.objects.filter(period=period)))


def days_of(records) -> set[tuple[int, date]]:
    """(cluster id, UTC day) pairs of a queryset of records, computed by the database."""
    return set(
        records.annotate(day=TruncDate("start", tzinfo=UTC)).values_list("cluster_id", "day").distinct().order_by()
    )
