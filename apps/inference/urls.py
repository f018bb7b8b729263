from django.urls import path

from apps.inference import views

app_name = "inference"
urlpatterns = [
    path("<int:pk>/telemetry/", views.service_telemetry, name="service_telemetry"),
    path("<int:pk>/slo/", views.service_slo, name="service_slo"),
]
