from django.urls import path

from apps.audit import views

app_name = "audit"
urlpatterns = [
    path("", views.AuditEventListView.as_view(), name="event_list"),
    path("<int:pk>/", views.audit_event_detail, name="event_detail"),
]
