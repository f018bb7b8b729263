from django.apps import AppConfig


class OperationsConfig(AppConfig):
    """Persisted long operations (drains, quota pushes, syncs) with status, progress, log and error."""

    name = "apps.operations"
    label = "operations"
    verbose_name = "Operations"
