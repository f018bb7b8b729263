from django.urls import path

from apps.chargeback import views

app_name = "chargeback"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("statements/", views.StatementListView.as_view(), name="statement_list"),
    path("statements/<int:pk>/", views.statement_detail, name="statement_detail"),
    path("statements/draft/<str:slug>/", views.statement_draft, name="statement_draft"),
    path("periods/", views.period_list, name="period_list"),
    path("rates/", views.rate_cards, name="rate_cards"),
    path("tenants/<str:slug>/spend/", views.tenant_spend, name="tenant_spend"),
]
