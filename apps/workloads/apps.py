from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    """Training jobs and inference services: specs, templates, exactly-once submission, status sync."""

    name = "apps.workloads"
    label = "workloads"
    verbose_name = "Workloads"
