from django.apps import AppConfig


class HealthConfig(AppConfig):
    """GPU health: DCGM ingestion, health rules, incidents, automatic isolation and runbook actions."""

    name = "apps.health"
    label = "health"
    verbose_name = "GPU health"

    def ready(self) -> None:
        from django.db.models.signals import post_delete
        from django.utils.translation import pgettext_lazy

        from apps.core import stored_text, value_labels
        from apps.health import operation_handlers, rules  # noqa: F401 - registers the runbook handlers
        from apps.health.models import Incident, IncidentState, NodeStatus, Severity, SourceKind
        from apps.health.services.notify import forget_incident_notifications
        from apps.health.services.runbook import ACTIONS

        stored_text.register(rules)  # incident titles
        # Severities of rules and incidents, and a node's or GPU's worst severity now (ok, suspect, unknown).
        value_labels.register_choices("severity", Severity, NodeStatus)
        value_labels.register_choices("incident state", IncidentState)
        value_labels.register_choices("telemetry source", SourceKind)
        value_labels.register(
            "runbook action",
            ACTIONS,
            (
                pgettext_lazy("runbook action", "cordon"),
                pgettext_lazy("runbook action", "uncordon"),
                pgettext_lazy("runbook action", "drain"),
                pgettext_lazy("runbook action", "resume"),
                pgettext_lazy("runbook action", "request-reset"),
                pgettext_lazy("runbook action", "mark-rma"),
            ),
        )
        # Notifications keep an incident's id, not a foreign key (their app sits below health).
        post_delete.connect(
            forget_incident_notifications, sender=Incident, dispatch_uid="health-incident-notifications"
        )
