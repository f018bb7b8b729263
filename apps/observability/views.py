"""The wait-time analytics page: percentiles over time per group, and why work is waiting now."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_safe

from apps.core.errors import ServiceError
from apps.observability import waits
from apps.observability.api import parse_when


@require_safe
@login_required
def wait_analytics(request):
    group_by = request.GET.get("group_by", "tenant")
    bucket = request.GET.get("bucket", "hour")
    try:
        series = waits.wait_series(
            request.user,
            group_by=group_by,
            bucket=bucket,
            since=parse_when(request.GET.get("since"), "since"),
            until=parse_when(request.GET.get("until"), "until"),
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
        group_by, bucket = "tenant", "hour"
        series = waits.wait_series(request.user)
    pending = waits.why_pending(request.user)
    rows = [
        {"category": category, **counts, "examples": pending["examples"].get(category, [])}
        for category, counts in pending["by_category"].items()
        if counts["workloads"]
    ]
    return render(
        request,
        "observability/waits.html",
        {
            "series": series,
            "pending": pending,
            "pending_rows": rows,
            "group_by": group_by,
            "bucket": bucket,
            "groups": list(waits.GROUPS),
            "buckets": list(waits.BUCKETS),
        },
    )
