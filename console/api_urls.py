"""/api/v1/: one router for every app's viewsets, plus the OpenAPI schema and docs.

It lives in console/, the top layer, because it names every app's API views; apps.core keeps only the
plumbing they share (error shape, pagination, base serializers)."""

import os

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from apps.accounts.api.views import (
    ApiTokenViewSet,
    FederatedTrustViewSet,
    GroupMappingViewSet,
    MembershipViewSet,
    MeView,
    ServiceAccountViewSet,
    TokenExchangeView,
    UserViewSet,
)
from apps.audit.api.views import AuditEventViewSet
from apps.backends.simulator.api import AdvanceView, FaultViewSet
from apps.chargeback.api.views import (
    CreditViewSet,
    PeriodViewSet,
    RateCardViewSet,
    SpendBudgetViewSet,
    StatementViewSet,
)
from apps.dashboard.api import OverviewView
from apps.fleet.api.views import CapacityView, ClusterViewSet, GpuModelViewSet, GpuViewSet, PoolViewSet
from apps.health.api.views import (
    ChannelViewSet,
    IncidentViewSet,
    IsolationPolicyViewSet,
    NodeViewSet,
    RuleViewSet,
    TelemetrySourceViewSet,
)
from apps.inference.api.views import ServiceViewSet
from apps.observability.api import WaitsView, WhyPendingView
from apps.operations.api.views import OperationViewSet
from apps.tenancy.api.quota_views import (
    AdmissionPreviewView,
    AdmissionViewSet,
    GuaranteeCapViewSet,
    QueueViewSet,
    QuotaRequestViewSet,
    QuotaViewSet,
    TierViewSet,
)
from apps.tenancy.api.views import TenantViewSet
from apps.workloads.api.views import TemplateViewSet, WorkloadSpecSchemaView, WorkloadViewSet

router = DefaultRouter()
# Workloads first: CI submits and polls them, and URL resolution tries patterns in order.
router.register("workloads", WorkloadViewSet, basename="workload")
router.register("tenants", TenantViewSet, basename="tenant")
router.register("users", UserViewSet, basename="user")
router.register("memberships", MembershipViewSet, basename="membership")
router.register("group-mappings", GroupMappingViewSet, basename="group-mapping")
router.register("service-accounts", ServiceAccountViewSet, basename="service-account")
router.register("tokens", ApiTokenViewSet, basename="token")
router.register("federated-trusts", FederatedTrustViewSet, basename="federated-trust")
router.register("audit-events", AuditEventViewSet, basename="audit-event")
router.register("operations", OperationViewSet, basename="operation")
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("pools", PoolViewSet, basename="pool")
router.register("nodes", NodeViewSet, basename="node")
router.register("gpus", GpuViewSet, basename="gpu")
router.register("gpu-models", GpuModelViewSet, basename="gpu-model")
router.register("simulator/faults", FaultViewSet, basename="sim-fault")
router.register("queues", QueueViewSet, basename="queue")
router.register("quotas", QuotaViewSet, basename="quota")
router.register("budgets", GuaranteeCapViewSet, basename="budget")
router.register("tiers", TierViewSet, basename="tier")
router.register("quota-requests", QuotaRequestViewSet, basename="quota-request")
router.register("admissions", AdmissionViewSet, basename="admission")
router.register("templates", TemplateViewSet, basename="template")
router.register("statements", StatementViewSet, basename="statement")
router.register("periods", PeriodViewSet, basename="period")
router.register("rate-cards", RateCardViewSet, basename="rate-card")
router.register("spend-budgets", SpendBudgetViewSet, basename="spend-budget")
router.register("credits", CreditViewSet, basename="credit")
router.register("services", ServiceViewSet, basename="service")
router.register("incidents", IncidentViewSet, basename="incident")
router.register("health-rules", RuleViewSet, basename="health-rule")
router.register("telemetry-sources", TelemetrySourceViewSet, basename="telemetry-source")
router.register("notification-channels", ChannelViewSet, basename="notification-channel")
router.register("isolation-policies", IsolationPolicyViewSet, basename="isolation-policy")

app_name = "api"
urlpatterns = [
    path("me/", MeView.as_view(), name="me"),
    path("token-exchange/", TokenExchangeView.as_view(), name="token-exchange"),
    path("capacity/", CapacityView.as_view(), name="capacity"),
    path("overview/", OverviewView.as_view(), name="overview"),
    path("analytics/waits/", WaitsView.as_view(), name="analytics-waits"),
    path("analytics/why-pending/", WhyPendingView.as_view(), name="analytics-why-pending"),
    path("admission/preview/", AdmissionPreviewView.as_view(), name="admission-preview"),
    path("simulator/advance/", AdvanceView.as_view(), name="sim-advance"),
    path("workload-specs/<str:kind>/schema/", WorkloadSpecSchemaView.as_view(), name="workload-spec-schema"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script as a file: the Content-Security-Policy allows no inline script.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api:schema"), name="redoc"),
    path("", include(router.urls)),
]

if os.environ.get("BENCH_BARE_ENDPOINT") == "1":  # the benchmark's baseline; never on in a deployment
    from console.bench import BareInsertView

    urlpatterns.insert(0, path("_bench/insert/", BareInsertView.as_view(), name="bench-insert"))
