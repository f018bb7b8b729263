from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Users, roles and tenant memberships, scoped API tokens and the one place permissions are decided."""

    name = "apps.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from django.utils.translation import pgettext_lazy

        from apps.accounts import lockout  # noqa: F401  (connects the lockout audit to Axes' signal)
        from apps.accounts.filtersets import visible_tenants
        from apps.accounts.permissions import allowed_tenant_ids
        from apps.accounts.roles import Action, Role
        from apps.accounts.sso import checks  # noqa: F401  (registers the identity provider's deploy check)
        from apps.core import tenant_scope, value_labels

        # Apps below accounts (audit) scope their rows by tenant through apps.core.tenant_scope.
        tenant_scope.register(allowed_tenant_ids=allowed_tenant_ids, visible_tenants=visible_tenants)
        value_labels.register_choices("role", Role)
        value_labels.register_choices("permission", Action)
        # ApiToken.status, worked out from its dates (no choices).
        value_labels.register(
            "token status",
            ("active", "revoked", "expired"),
            (
                pgettext_lazy("token status", "active"),
                pgettext_lazy("token status", "revoked"),
                pgettext_lazy("token status", "expired"),
            ),
        )
