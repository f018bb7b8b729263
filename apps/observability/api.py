"""GET /api/v1/analytics/waits/ and /api/v1/analytics/why-pending/: wait-time analytics for the user's tenants."""

from __future__ import annotations

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.errors import InvalidInput
from apps.observability import waits


def parse_when(value: str | None, name: str):
    """An ISO 8601 time from a query parameter (naive times are in the console's time zone)."""
    if not value:
        return None
    parsed = parse_datetime(value)
    if parsed is None:
        raise InvalidInput(f"{name} must be an ISO 8601 time, e.g. 2026-11-30T12:00:00Z.", {name: "Not a time."})
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)


class WaitsView(APIView):
    """p50 / p90 / p99 of submit → running per group and time bucket, for workloads that started in the window."""

    @extend_schema(
        parameters=[
            OpenApiParameter("group_by", str, enum=list(waits.GROUPS), description="default tenant"),
            OpenApiParameter("bucket", str, enum=list(waits.BUCKETS), description="default hour"),
            OpenApiParameter("since", OpenApiTypes.DATETIME, description="default: 1 day (hour) or 30 days (day) ago"),
            OpenApiParameter("until", OpenApiTypes.DATETIME, description="default: now"),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request):
        params = request.query_params
        return Response(
            waits.wait_series(
                request.user,
                group_by=params.get("group_by", "tenant"),
                bucket=params.get("bucket", "hour"),
                since=parse_when(params.get("since"), "since"),
                until=parse_when(params.get("until"), "until"),
            )
        )


class WhyPendingView(APIView):
    """Work waiting now by category (quota, capacity, fragmentation, backend unavailable, policy) and tenant."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request):
        return Response(waits.why_pending(request.user))
