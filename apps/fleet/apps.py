from django.apps import AppConfig


class FleetConfig(AppConfig):
    """Clusters, node pools, nodes, GPUs and the GPU model catalog; inventory sync from the backends."""

    name = "apps.fleet"
    label = "fleet"
    verbose_name = "Fleet"

    def ready(self) -> None:
        from apps.fleet import operations  # noqa: F401 - registers the fleet operation handlers
