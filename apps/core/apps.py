from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Framework pieces every app uses: request ids, the API's error shape, pagination, base serializers."""

    name = "apps.core"
    label = "core"

    def ready(self) -> None:
        from apps.core import checks  # noqa: F401  (registers the SECRET_KEY check)
