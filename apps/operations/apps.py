from django.apps import AppConfig


class OperationsConfig(AppConfig):
    """Persisted long operations (drains, quota pushes, syncs) with status, progress, log and error."""

    name = "apps.operations"
    label = "operations"
    verbose_name = "Operations"

    def ready(self) -> None:
        from apps.core import value_labels
        from apps.operations.models import OperationStatus

        value_labels.register_choices("operation status", OperationStatus)
