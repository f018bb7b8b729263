from django.apps import AppConfig


class FleetConfig(AppConfig):
    """Clusters, node pools, nodes, GPUs and the GPU model catalog; inventory sync from the backends."""

    name = "apps.fleet"
    label = "fleet"
    verbose_name = "Fleet"

    def ready(self) -> None:
        from apps.core import value_labels
        from apps.fleet import operation_handlers  # noqa: F401 - registers the fleet operation handlers
        from apps.fleet.models import GpuHealth, NodeState

        value_labels.register_choices("node state", NodeState)
        value_labels.register_choices("gpu health", GpuHealth)
