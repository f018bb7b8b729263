from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    """Training jobs and inference services: specs, templates, exactly-once submission, status sync."""

    name = "apps.workloads"
    label = "workloads"
    verbose_name = "Workloads"

    def ready(self) -> None:
        from apps.core import stored_text, value_labels
        from apps.fleet.owners import register_owner_resolver
        from apps.workloads import reasons
        from apps.workloads.models import WorkloadKind, WorkloadState
        from apps.workloads.owners import owners

        stored_text.register(reasons)  # workload reasons and events
        value_labels.register_choices("workload state", WorkloadState)
        value_labels.register_choices("workload kind", WorkloadKind)
        register_owner_resolver(owners)  # the fleet's views name only the work a user may see

        from apps.workloads import previews
        from apps.workloads.panels import register_submit_preview

        # Beside the submit form: what admission would decide now, and what the cluster would receive.
        register_submit_preview(
            "admission",
            previews.ADMISSION_TITLE,
            "workloads/_preview_admission.html",
            previews.admission_context,
            order=10,
        )
        register_submit_preview(
            "rendering",
            previews.RENDERING_TITLE,
            "workloads/_preview_rendering.html",
            previews.rendering_context,
            order=30,  # the longest: last
        )
