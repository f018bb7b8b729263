from django.apps import AppConfig


class ChargebackConfig(AppConfig):
    """Usage metering, rate cards, monthly statements, fault credits, idle waste and spend budgets."""

    name = "apps.chargeback"
    label = "chargeback"
    verbose_name = "Chargeback"
