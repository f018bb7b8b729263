from django.urls import path

from apps.accounts import views
from apps.accounts.sso import pages as sso_pages

app_name = "accounts"
urlpatterns = [
    path("profile/", views.profile, name="profile"),
    path("switch-tenant/", views.switch_tenant, name="switch_tenant"),
    path("memberships/", views.MembershipListView.as_view(), name="memberships"),
    path("memberships/<int:pk>/change/", views.membership_change, name="membership_change"),
    path("memberships/<int:pk>/revoke/", views.membership_revoke, name="membership_revoke"),
    path("service-accounts/new/", views.service_account_create, name="service_account_create"),
    path("group-mappings/", sso_pages.group_mappings, name="group_mappings"),
    path("group-mappings/<int:pk>/delete/", sso_pages.group_mapping_delete, name="group_mapping_delete"),
    path("tokens/", views.TokenListView.as_view(), name="tokens"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
]
