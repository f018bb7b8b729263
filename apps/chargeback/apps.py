from django.apps import AppConfig


class ChargebackConfig(AppConfig):
    """Usage metering, rate cards, monthly statements, fault credits, idle waste and spend budgets."""

    name = "apps.chargeback"
    label = "chargeback"
    verbose_name = "Chargeback"

    def ready(self) -> None:
        from apps.chargeback.estimates import COST_TITLE, cost_preview
        from apps.chargeback.reports import workload_cost_panel
        from apps.workloads.panels import register_status_panel, register_submit_preview

        # A workload's page shows what it cost, though workloads (below chargeback) knows nothing of cost; the
        # submit form shows what it would cost.
        register_status_panel("chargeback/_workload_cost.html", workload_cost_panel)
        register_submit_preview("cost", COST_TITLE, "chargeback/_preview_cost.html", cost_preview, order=20)
