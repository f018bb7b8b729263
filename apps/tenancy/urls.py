from django.urls import path

from apps.tenancy import views

app_name = "tenancy"
urlpatterns = [
    path("", views.TenantListView.as_view(), name="tenant_list"),
    path("new/", views.tenant_create, name="tenant_create"),
    path("queues/<int:pk>/", views.queue_detail, name="queue_detail"),
    path("quota-requests/", views.quota_requests, name="quota_requests"),
    path("tiers/", views.tiers, name="tiers"),
    path("<str:slug>/", views.tenant_detail, name="tenant_detail"),
    path("<str:slug>/archive/", views.tenant_archive, name="tenant_archive"),
]
