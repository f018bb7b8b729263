from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """Tenants (organization → team, any depth); the tenancy issue adds queues, quotas and priority tiers."""

    name = "apps.tenancy"
    label = "tenancy"
    verbose_name = "Tenancy"
