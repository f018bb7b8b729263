from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    """Training jobs and inference services: specs, templates, exactly-once submission, status sync."""

    name = "apps.workloads"
    label = "workloads"
    verbose_name = "Workloads"

    def ready(self) -> None:
        from apps.core import stored_text, value_labels
        from apps.workloads import reasons
        from apps.workloads.models import WorkloadKind, WorkloadState

        stored_text.register(reasons)  # workload reasons and events
        value_labels.register_choices("workload state", WorkloadState)
        value_labels.register_choices("workload kind", WorkloadKind)
