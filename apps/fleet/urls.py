from django.urls import path

from apps.fleet import views
from apps.fleet.pages import CLUSTER_PAGES

app_name = "fleet"
urlpatterns = [
    path("", views.cluster_list, name="cluster_list"),
    path("capacity/", views.capacity, name="capacity"),
    path("gpu-models/", views.gpu_models, name="gpu_models"),
    path("nodes/", views.NodeListView.as_view(), name="node_list"),
    path("clusters/<str:name>/", views.cluster_detail, name="cluster_detail"),
    path("clusters/<str:name>/sync/", views.cluster_sync, name="cluster_sync"),
    # Pages other apps register (apps/fleet/pages.py): tenancy's desired quota state at desired-state/.
    *(path(f"clusters/<str:name>/{route}", view, name=page) for route, view, page in CLUSTER_PAGES),
    path("clusters/<str:name>/test-connection/", views.cluster_test_connection, name="cluster_test_connection"),
    path("clusters/<str:name>/quota-push/", views.cluster_quota_push, name="cluster_quota_push"),
    path("clusters/<str:name>/quota-drift/", views.cluster_quota_drift, name="cluster_quota_drift"),
    path("clusters/<str:name>/pools/<str:pool>/prepull/", views.pool_prepull, name="pool_prepull"),
    path("clusters/<str:cluster>/nodes/<str:name>/", views.node_detail, name="node_detail"),
    path("clusters/<str:cluster>/nodes/<str:name>/telemetry/", views.node_telemetry, name="node_telemetry"),
    path("clusters/<str:cluster>/nodes/<str:name>/fault/", views.node_fault, name="node_fault"),
]
