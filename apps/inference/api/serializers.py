from rest_framework import serializers

from apps.core.api.serializers import StrictSerializer
from apps.inference.models import ServiceAlert
from apps.inference.series import DEFAULT_WINDOW, WINDOWS
from apps.workloads.models import Workload


class ServiceSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    engine = serializers.SerializerMethodField()
    telemetry_status = serializers.SerializerMethodField()

    class Meta:
        model = Workload
        fields = ["id", "name", "tenant", "cluster", "state", "backend_name", "engine", "telemetry_status"]
        read_only_fields = fields

    def get_engine(self, workload) -> str:
        return workload.spec.get("engine", "")

    def get_telemetry_status(self, workload) -> str:
        telemetry = getattr(workload, "telemetry", None)
        return telemetry.status if telemetry else "never"


class WindowSerializer(StrictSerializer):
    window = serializers.ChoiceField(choices=sorted(WINDOWS), default=DEFAULT_WINDOW)


class SloSerializer(StrictSerializer):
    ttft_target_s = serializers.FloatField(required=False, help_text="seconds; p(objective) of TTFT must stay below")
    tpot_target_s = serializers.FloatField(required=False, help_text="seconds per output token")
    objective = serializers.FloatField(required=False, help_text="share of requests within target, e.g. 0.99")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


class AlertSerializer(serializers.ModelSerializer):
    class Meta:
        model = ServiceAlert
        fields = ["id", "sli", "window", "state", "fired_at", "resolved_at", "burn_long", "burn_short", "threshold"]
        fields += ["message"]
        read_only_fields = fields
