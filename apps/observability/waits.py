"""Queue wait-time analytics: p50 / p90 / p99 of submit → running over time, and why work is waiting now.

Both read only the workloads the user may view. Percentiles are computed in Python from the waits
of the workloads that started in the window (the same code on PostgreSQL and the demo's SQLite);
a window holding more than MAX_ROWS starts is cut to the newest MAX_ROWS and says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.translation import gettext as _

from apps.core.errors import InvalidInput
from apps.observability.reasons import CATEGORIES, reason_category
from apps.workloads.models import Workload

GROUPS = {"tenant": "tenant__slug", "queue": "queue__name", "gpu_model": "gpu_model__code", "tier": "tier__name"}
BUCKETS = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
MAX_ROWS = 200_000
MAX_POINTS = 2_000


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in 0..1)."""
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def _bucket_start(when: datetime, size: timedelta) -> datetime:
    if size == BUCKETS["day"]:
        return when.replace(hour=0, minute=0, second=0, microsecond=0)
    return when.replace(minute=0, second=0, microsecond=0)


def wait_series(user, *, group_by: str = "tenant", bucket: str = "hour", since=None, until=None) -> dict:
    if group_by not in GROUPS:
        raise InvalidInput(
            _("group_by must be one of %(values)s.") % {"values": ", ".join(GROUPS)},
            {"group_by": _("Unknown grouping.")},
        )
    if bucket not in BUCKETS:
        raise InvalidInput(
            _("bucket must be one of %(values)s.") % {"values": ", ".join(BUCKETS)}, {"bucket": _("Unknown bucket.")}
        )
    until = until or timezone.now()
    since = since or until - timedelta(days=1 if bucket == "hour" else 30)
    if since >= until:
        raise InvalidInput(_("since must be before until."), {"since": _("Must be before until.")})
    size = BUCKETS[bucket]
    if (until - since) / size > MAX_POINTS:
        raise InvalidInput(
            _("That window has more than %(max_points)s %(bucket)ss; use a shorter window or a larger bucket.")
            % {"max_points": MAX_POINTS, "bucket": bucket},
            {"since": _("Window too long for this bucket.")},
        )
    field = GROUPS[group_by]
    extra = ["tenant__slug"] if group_by == "queue" else []
    rows = list(
        Workload.objects.for_user(user, "view")
        .filter(started_at__gte=since, started_at__lt=until)
        .order_by("-started_at")
        .values_list(field, "created_at", "started_at", *extra)[: MAX_ROWS + 1]
    )
    truncated = len(rows) > MAX_ROWS
    waits: dict[str, dict[datetime, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows[:MAX_ROWS]:
        group = f"{row[3]}/{row[0]}" if group_by == "queue" else row[0]
        waits[group][_bucket_start(timezone.localtime(row[2]), size)].append(
            max((row[2] - row[1]).total_seconds(), 0.0)
        )
    series = []
    for group in sorted(waits):
        points = []
        for start in sorted(waits[group]):
            values = sorted(waits[group][start])
            points.append(
                {
                    "t": start.isoformat(),
                    "count": len(values),
                    "p50": percentile(values, 0.5),
                    "p90": percentile(values, 0.9),
                    "p99": percentile(values, 0.99),
                }
            )
        series.append({"group": group, "points": points})
    return {
        "group_by": group_by,
        "bucket": bucket,
        "since": since.isoformat(),
        "until": until.isoformat(),
        "truncated": truncated,
        "series": series,
    }


def why_pending(user) -> dict:
    """Work waiting now (for quota, or admitted and waiting at its cluster), by reason category and tenant, and
    the waiting heads of their queues that hold a reservation, with their expected start (None: not known)."""
    now = timezone.now()
    by_category = {c: {"workloads": 0, "gpus": 0.0, "oldest_s": 0} for c in CATEGORIES}
    by_tenant: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(CATEGORIES, 0))
    examples: dict[str, list[dict]] = defaultdict(list)
    reserved: list[dict] = []
    for pk, name, tenant, gpus, reason, created, start, held in (
        Workload.objects.for_user(user, "view")
        .filter(state__in=["pending", "admitted"])
        .order_by("created_at")
        .values_list(
            "id",
            "name",
            "tenant__slug",
            "gpus",
            "state_reason",
            "created_at",
            "admission__expected_start",
            "admission__reserved_units",
        )
    ):
        if held and len(reserved) < 20:  # heads of their queues holding a reservation (apps/tenancy/reservations.py)
            reserved.append(
                {"id": pk, "name": name, "tenant": tenant, "expected_start": start.isoformat() if start else None}
            )
        category = reason_category(reason)
        entry = by_category[category]
        entry["workloads"] += 1
        entry["gpus"] += gpus
        entry["oldest_s"] = max(entry["oldest_s"], int((now - created).total_seconds()))
        by_tenant[tenant][category] += 1
        if len(examples[category]) < 5:
            examples[category].append({"id": pk, "name": name, "tenant": tenant, "reason": reason})
    return {
        "total": sum(c["workloads"] for c in by_category.values()),
        "by_category": by_category,
        "by_tenant": dict(sorted(by_tenant.items())),
        "examples": dict(examples),
        "reservations": reserved,
    }
