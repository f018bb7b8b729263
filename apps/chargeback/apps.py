from django.apps import AppConfig


class ChargebackConfig(AppConfig):
    """Usage metering, rate cards, monthly statements, fault credits, idle waste and spend budgets."""

    name = "apps.chargeback"
    label = "chargeback"
    verbose_name = "Chargeback"

    def ready(self) -> None:
        from apps.chargeback.reports import workload_cost_panel
        from apps.workloads.panels import register_status_panel

        # A workload's page shows what it cost, though workloads (below chargeback) knows nothing of cost.
        register_status_panel("chargeback/_workload_cost.html", workload_cost_panel)
