from django.urls import path

from apps.accounts.sso import views

app_name = "oidc"
urlpatterns = [
    path("login/", views.OidcLoginView.as_view(), name="login"),
    path("callback/", views.OidcCallbackView.as_view(), name="callback"),
]
