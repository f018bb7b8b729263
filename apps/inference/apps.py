from django.apps import AppConfig


class InferenceConfig(AppConfig):
    """Inference service telemetry: engine /metrics scrapes, TTFT/TPOT series, SLOs and burn-rate alerts."""

    name = "apps.inference"
    label = "inference"
    verbose_name = "Inference telemetry"
