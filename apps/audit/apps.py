from django.apps import AppConfig


class AuditConfig(AppConfig):
    """Append-only audit events written by services in the same transaction as the change."""

    name = "apps.audit"
    label = "audit"
    verbose_name = "Audit"
