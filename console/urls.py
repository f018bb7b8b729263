"""Top-level URLs: pages per app, the REST API under /api/v1/, Django admin for platform admins."""

from django.contrib import admin
from django.urls import include, path
from django.views.i18n import set_language

from apps.accounts.views import LoginView, LogoutView
from apps.observability import probes
from apps.observability.metrics import metrics_view

urlpatterns = [
    path("api/v1/", include("console.api_urls")),  # first: the API is the hot path (CI polls it)
    path("", include("apps.dashboard.urls")),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/logout/", LogoutView.as_view(), name="logout"),
    path("accounts/", include("apps.accounts.urls")),
    path("oidc/", include("apps.accounts.sso.urls")),
    path("tenants/", include("apps.tenancy.urls")),
    path("fleet/", include("apps.fleet.urls")),
    path("workloads/", include("apps.workloads.urls")),
    path("chargeback/", include("apps.chargeback.urls")),
    path("services/", include("apps.inference.urls")),
    path("health/", include("apps.health.urls")),
    path("audit/", include("apps.audit.urls")),
    path("operations/", include("apps.operations.urls")),
    path("i18n/setlang/", set_language, name="set_language"),
    path("admin/", admin.site.urls),
    path("simulator/", include("apps.backends.simulator.urls")),
    path("observability/", include("apps.observability.urls")),
    path("healthz", probes.healthz, name="healthz"),
    path("readyz", probes.readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
]

# Django's own errors (no view matched, an exception escaped): JSON on /api/ paths, HTML pages elsewhere.
handler400 = "apps.core.api.handlers.bad_request"
handler403 = "apps.core.api.handlers.permission_denied"
handler404 = "apps.core.api.handlers.page_not_found"
handler500 = "apps.core.api.handlers.server_error"
