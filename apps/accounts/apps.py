from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Users, roles and tenant memberships, scoped API tokens and the one place permissions are decided."""

    name = "apps.accounts"
    label = "accounts"
    verbose_name = "Accounts"
