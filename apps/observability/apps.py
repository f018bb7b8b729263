from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    name = "apps.observability"
    label = "observability"
    verbose_name = "Observability"

    def ready(self) -> None:
        from apps.observability import instrument

        instrument.connect_celery_signals()
