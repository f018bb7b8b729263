from django.urls import path

from apps.health import views

app_name = "health"
urlpatterns = [
    path("", views.fleet_health, name="fleet_health"),
    path("incidents/", views.IncidentListView.as_view(), name="incident_list"),
    path("incidents/<int:pk>/", views.incident_detail, name="incident_detail"),
    path("incidents/<int:pk>/transition/", views.incident_transition, name="incident_transition"),
    path("nodes/<int:pk>/", views.node_health, name="node_health"),
    path("nodes/<int:pk>/action/", views.node_action, name="node_action"),
    path("rules/", views.rules, name="rules"),
]
