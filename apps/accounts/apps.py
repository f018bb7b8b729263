from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Users, roles and tenant memberships, scoped API tokens and the one place permissions are decided."""

    name = "apps.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from django.utils.translation import pgettext_lazy

        from apps.accounts.roles import Action, Role
        from apps.core import value_labels

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
