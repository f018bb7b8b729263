"""URLs of the simulated exporters. console/urls.py mounts them at /simulator/."""

from django.urls import path

from apps.backends.simulator import views

app_name = "simulator"

urlpatterns = [
    path("<str:cluster>/nodes/<str:node>/metrics", views.node_metrics, name="node_metrics"),
    path("<str:cluster>/services/<str:name>/metrics", views.service_metrics, name="service_metrics"),
]
