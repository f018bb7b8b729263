from django.urls import path

from apps.observability import views

app_name = "observability"

urlpatterns = [
    path("waits/", views.wait_analytics, name="waits"),
]
