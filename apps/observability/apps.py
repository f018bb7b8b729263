from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    name = "apps.observability"
    label = "observability"
    verbose_name = "Observability"

    def ready(self) -> None:
        from django.utils.translation import pgettext_lazy

        from apps.core import value_labels
        from apps.observability import instrument
        from apps.observability.reasons import CATEGORIES
        from apps.observability.waits import BUCKETS, GROUPS

        instrument.connect_celery_signals()
        value_labels.register(
            "wait grouping",
            [*GROUPS, *BUCKETS],
            (
                pgettext_lazy("wait grouping", "tenant"),
                pgettext_lazy("wait grouping", "queue"),
                pgettext_lazy("wait grouping", "gpu_model"),
                pgettext_lazy("wait grouping", "tier"),
                pgettext_lazy("wait grouping", "hour"),
                pgettext_lazy("wait grouping", "day"),
            ),
        )
        value_labels.register(
            "wait reason",
            CATEGORIES,
            (
                pgettext_lazy("wait reason", "quota"),
                pgettext_lazy("wait reason", "capacity"),
                pgettext_lazy("wait reason", "fragmentation"),
                pgettext_lazy("wait reason", "backend unavailable"),
                pgettext_lazy("wait reason", "policy"),
                pgettext_lazy("wait reason", "other"),
            ),
        )
