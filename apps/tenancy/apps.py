from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """Tenants (organization → team, any depth); the tenancy issue adds queues, quotas and priority tiers."""

    name = "apps.tenancy"
    label = "tenancy"
    verbose_name = "Tenancy"

    def ready(self) -> None:
        from django.utils.translation import pgettext_lazy

        from apps.core import stored_text, value_labels
        from apps.fleet.pages import register_capacity_panel, register_cluster_page
        from apps.tenancy import (
            admission,
            operation_handlers,  # noqa: F401 - registers the quota push and drift operations
            placement,
        )
        from apps.tenancy.models import AdmissionState
        from apps.tenancy.views import cluster_desired_state

        # The cluster's desired quota state, under the fleet's URLs (fleet:cluster_desired_state).
        register_cluster_page("desired-state/", cluster_desired_state, "cluster_desired_state")
        # What no queue guarantees, per cluster: lendable to all (platform admins see it on the capacity page).
        from apps.tenancy.capacity import unguaranteed_panel

        register_capacity_panel("tenancy/_unguaranteed.html", unguaranteed_panel)

        stored_text.register(admission)  # admission reasons (reservations' among them)
        stored_text.register(placement)  # why a submission went to its cluster
        # Marked here, not on the classes: Decision lives in the pure admission engine (no Django), and
        # AdmissionState's marks can join the class once the tenant tree has moved out of tenancy/models.py.
        value_labels.register(
            "admission state",
            AdmissionState.values,
            (
                pgettext_lazy("admission state", "pending"),
                pgettext_lazy("admission state", "admitted"),
                pgettext_lazy("admission state", "rejected"),
                pgettext_lazy("admission state", "released"),
            ),
        )
        value_labels.register(
            "admission decision",
            [d.value for d in admission.Decision],
            (
                pgettext_lazy("admission decision", "admit"),
                pgettext_lazy("admission decision", "borrow"),
                pgettext_lazy("admission decision", "reclaim"),
                pgettext_lazy("admission decision", "queue"),
                pgettext_lazy("admission decision", "reject"),
            ),
        )
