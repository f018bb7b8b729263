from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.core.api.views import ScopedViewSetMixin
from apps.inference import services
from apps.inference.api.serializers import AlertSerializer, ServiceSerializer, SloSerializer, WindowSerializer
from apps.inference.series import WINDOWS, service_status, telemetry_series
from apps.workloads.models import Workload, WorkloadKind

WINDOW = OpenApiParameter("window", str, enum=sorted(WINDOWS), description="How far back the series go.")


class ServiceViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """Inference services: GET .../telemetry/ for the series and SLO status, GET/PUT .../slo/, GET .../alerts/."""

    model = Workload
    serializer_class = ServiceSerializer
    filterset_fields = ["state", "cluster__name", "tenant__slug"]

    def get_queryset(self):
        qs = super().get_queryset().filter(kind=WorkloadKind.INFERENCE)
        return qs.select_related("tenant", "cluster", "telemetry")

    @extend_schema(parameters=[WINDOW], responses={200: None})
    @action(detail=True, methods=["get"])
    def telemetry(self, request, pk=None):
        """TTFT/TPOT p50/p99 (s), running and waiting requests, KV-cache use (0..1), tokens/s and replicas over
        time, with the telemetry's freshness, the SLO targets, burn rates and firing alerts."""
        query = WindowSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        workload = self.get_object()
        window = query.validated_data["window"]
        series = telemetry_series(workload, window)
        return Response({"service": workload.pk, "window": window, **service_status(workload), "series": series})

    @extend_schema(methods=["PUT"], request=SloSerializer, responses={200: None})
    @extend_schema(methods=["GET"], responses={200: None})
    @action(detail=True, methods=["get", "put"])
    def slo(self, request, pk=None):
        """The service's SLO targets; PUT changes them (tenant admins; audited)."""
        workload = self.get_object()
        if request.method == "PUT":
            body = SloSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            services.set_slo(request.user, workload, **body.validated_data)
        return Response(service_status(workload)["slo"])

    @extend_schema(responses=AlertSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def alerts(self, request, pk=None):
        """The service's burn-rate alerts, newest first (the last 100)."""
        workload = self.get_object()
        return Response(AlertSerializer(workload.service_alerts.all()[:100], many=True).data)
