from django.urls import path

from apps.operations import views

app_name = "operations"
urlpatterns = [
    path("", views.OperationListView.as_view(), name="operation_list"),
    path("<int:pk>/", views.operation_detail, name="operation_detail"),
]
