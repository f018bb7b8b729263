from django.apps import AppConfig


class BackendsConfig(AppConfig):
    """One interface to Kubernetes, Slurm and the simulator, and a registry keyed by cluster kind."""

    name = "apps.backends"
    label = "backends"
    verbose_name = "Backends"
