from django.urls import path

from apps.workloads import views

app_name = "workloads"
urlpatterns = [
    path("", views.WorkloadListView.as_view(), name="workload_list"),
    path("new/", views.workload_submit, name="workload_submit"),
    path("new/editor/", views.submit_editor, name="submit_editor"),
    path("new/preview/<slug:key>/", views.submit_preview, name="submit_preview"),
    path("templates/", views.TemplateListView.as_view(), name="template_list"),
    path("<int:pk>/", views.workload_detail, name="workload_detail"),
    path("<int:pk>/cancel/", views.workload_cancel, name="workload_cancel"),
    path("<int:pk>/logs/", views.workload_logs, name="workload_logs"),
]
