from django.apps import AppConfig


class HealthConfig(AppConfig):
    """GPU health: DCGM ingestion, health rules, incidents, automatic isolation and runbook actions."""

    name = "apps.health"
    label = "health"
    verbose_name = "GPU health"

    def ready(self) -> None:
        from apps.health import operations  # noqa: F401 - registers the runbook operation handlers
