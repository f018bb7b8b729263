"""GET /api/v1/overview/: the home page's numbers as JSON, for scripts and other dashboards."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.dashboard.overview import as_json, fleet_overview


class OverviewView(APIView):
    """The fleet at a glance: GPUs by model and state, fragmentation, utilization by node and GPU index,
    allocation and pending demand by tenant, open incidents, the isolation budget and this month's spend.
    Tenant rows (demand, spend) cover the tenants you may view; other tenants' demand is one sum."""

    @extend_schema(
        responses=OpenApiResponse(OpenApiTypes.OBJECT, description="The overview's panels, as on the home page.")
    )
    def get(self, request):
        return Response(as_json(fleet_overview(request.user)))
