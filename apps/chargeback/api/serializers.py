"""Serializers for the chargeback API. Money and GPU-hours are decimal strings, never floats."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.accounts.api.fields import TenantField
from apps.chargeback.exports import to_json
from apps.chargeback.models import Credit, Period, RateCard, SpendBudget, Statement
from apps.core.api.serializers import StrictModelSerializer, StrictSerializer
from apps.fleet.models import Cluster, GpuModel
from apps.tenancy.models import PriorityTier

_MODEL = {"slug_field": "code", "queryset": GpuModel.objects.all()}
_TIER = {"slug_field": "name", "queryset": PriorityTier.objects.all()}


class PeriodSerializer(serializers.ModelSerializer):
    label = serializers.CharField(read_only=True)
    closed_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Period
        fields = ["id", "label", "start", "end", "state", "closed_at", "closed_by"]


class PeriodActionSerializer(StrictSerializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class StatementSerializer(serializers.ModelSerializer):
    period = serializers.CharField(source="period.label", read_only=True)
    period_state = serializers.CharField(source="period.state", read_only=True)
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Statement
        fields = [
            "id",
            "period",
            "period_state",
            "tenant",
            "currency",
            "gpu_hours",
            "usage_amount",
            "credit_gpu_hours",
            "credit_amount",
            "idle_gpu_hours",
            "idle_amount",
            "total",
            "computed_at",
        ]


class StatementDetailSerializer(StatementSerializer):
    """A statement row as the list has it, plus its period's bounds, `totals` and `lines` (apps/chargeback/exports.py:
    every amount and GPU-hour figure a decimal string, "" where a line has none)."""

    period_start = serializers.DateTimeField(source="period.start", read_only=True)
    period_end = serializers.DateTimeField(source="period.end", read_only=True)
    totals = serializers.SerializerMethodField()
    lines = serializers.SerializerMethodField()

    class Meta(StatementSerializer.Meta):
        fields = [*StatementSerializer.Meta.fields, "period_start", "period_end", "totals", "lines"]

    @extend_schema_field(serializers.DictField(child=serializers.CharField(allow_blank=True)))
    def get_totals(self, statement: Statement) -> dict:
        return self._exported(statement)["totals"]

    @extend_schema_field(
        serializers.ListField(child=serializers.DictField(child=serializers.CharField(allow_blank=True)))
    )
    def get_lines(self, statement: Statement) -> list:
        return self._exported(statement)["lines"]

    def _exported(self, statement: Statement) -> dict:
        cache = self.__dict__.setdefault("_exports", {})
        if statement.pk not in cache:
            cache[statement.pk] = to_json(statement)
        return cache[statement.pk]


class RateCardSerializer(StrictModelSerializer):
    gpu_model = serializers.SlugRelatedField(**_MODEL)
    tier = serializers.SlugRelatedField(**_TIER, required=False, allow_null=True)
    rate = serializers.DecimalField(max_digits=12, decimal_places=6, coerce_to_string=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = RateCard
        fields = ["id", "gpu_model", "tier", "rate", "currency", "effective_from", "note", "created_by", "created_at"]
        read_only_fields = ["currency", "created_at"]
        validators = []


class SpendBudgetSerializer(StrictModelSerializer):
    tenant = TenantField()
    monthly_amount = serializers.DecimalField(max_digits=16, decimal_places=2, coerce_to_string=True)
    thresholds = serializers.ListField(child=serializers.IntegerField(), required=False, max_length=10)
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=2000)

    class Meta:
        model = SpendBudget
        fields = [
            "id",
            "tenant",
            "monthly_amount",
            "currency",
            "thresholds",
            "block_preemptible_when_over",
            "over_since",
            "reason",
        ]
        read_only_fields = ["currency", "over_since"]
        validators = []


class CreditSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    gpu_model = serializers.SlugRelatedField(slug_field="code", read_only=True)
    period = serializers.CharField(source="period.label", read_only=True)

    class Meta:
        model = Credit
        fields = [
            "id",
            "tenant",
            "cluster",
            "backend_id",
            "workload",
            "gpu_model",
            "period",
            "interrupted_at",
            "checkpoint_at",
            "run_started_at",
            "gpus",
            "gpu_seconds",
            "state",
            "reason",
            "incident_ref",
            "incident_url",
            "created_at",
        ]


class CreditRequestSerializer(StrictSerializer):
    """Credit workloads a hardware fault interrupted; `interrupted_at` is in the cluster's clock."""

    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())
    backend_ids = serializers.ListField(child=serializers.CharField(max_length=253), min_length=1, max_length=1000)
    interrupted_at = serializers.DateTimeField()
    checkpoint_at = serializers.DateTimeField(required=False, allow_null=True)
    reason = serializers.CharField(max_length=500)
    incident_ref = serializers.CharField(required=False, allow_blank=True, max_length=100)
    incident_url = serializers.CharField(required=False, allow_blank=True, max_length=500)
