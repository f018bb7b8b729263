from rest_framework import serializers

from apps.core.api.serializers import StrictSerializer
from apps.health.models import (
    Incident,
    IncidentEvent,
    IncidentState,
    IsolationPolicy,
    Rule,
    Severity,
    SourceKind,
    TelemetrySource,
)
from apps.health.services.runbook import ACTIONS
from apps.notifications.models import ChannelKind, NotificationChannel


class IncidentSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name", read_only=True)
    node_id = serializers.IntegerField(read_only=True)
    cluster = serializers.CharField(source="node.cluster.name", read_only=True)
    allowed_transitions = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = Incident
        fields = [
            "id",
            "cluster",
            "node",
            "node_id",
            "cause",
            "title",
            "severity",
            "action",
            "state",
            "allowed_transitions",
            "rule_key",
            "ruleset_version",
            "gpus",
            "waiting_for",
            "auto_isolated_at",
            "occurrences",
            "detected_at",
            "last_seen_at",
            "clean_since",
            "closed_at",
        ]
        read_only_fields = fields


class IncidentEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = IncidentEvent
        fields = ["time", "actor_label", "kind", "from_state", "to_state", "message"]
        read_only_fields = fields


class IncidentDetailSerializer(IncidentSerializer):
    events = IncidentEventSerializer(many=True, read_only=True)
    workloads = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    tenants = serializers.SlugRelatedField(many=True, slug_field="slug", read_only=True)

    class Meta(IncidentSerializer.Meta):
        fields = [*IncidentSerializer.Meta.fields, "evidence", "workloads", "tenants", "events"]
        read_only_fields = fields


class TransitionSerializer(StrictSerializer):
    to = serializers.ChoiceField(choices=IncidentState.choices)
    reason = serializers.CharField(max_length=2000)


class NodeActionSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    dry_run = serializers.BooleanField(default=False, help_text="preview the impact; change nothing")
    incident = serializers.IntegerField(required=False, help_text="the incident this action answers")


class ImpactSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=list(ACTIONS))
    node = serializers.CharField()
    cluster = serializers.CharField()
    evicted = serializers.ListField(child=serializers.DictField())
    tenants_below_guarantee = serializers.ListField(child=serializers.DictField())
    capacity_left = serializers.ListField(child=serializers.DictField())
    warnings = serializers.ListField(child=serializers.CharField())


class RuleSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(source="ruleset.version", read_only=True)

    class Meta:
        model = Rule
        fields = ["key", "version", "cause", "title", "kind", "params", "severity", "action", "enabled"]
        read_only_fields = fields


class RuleTuneSerializer(StrictSerializer):
    severity = serializers.CharField(required=False)
    action = serializers.CharField(required=False)
    enabled = serializers.BooleanField(required=False)
    params = serializers.JSONField(required=False)
    note = serializers.CharField(required=False, allow_blank=True, max_length=500)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class TelemetrySourceSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)

    class Meta:
        model = TelemetrySource
        fields = [
            "id",  # what /telemetry-sources/{id}/ takes
            "cluster",
            "kind",
            "url_pattern",
            "prometheus_url",
            "timeout_s",
            "enabled",
            "last_cycle_at",
            "last_duration_ms",
            "last_nodes",
            "last_unreachable",
            "last_samples",
            "last_malformed",
            "last_sentinels",
            "malformed_by_node",
            "last_error",
        ]
        read_only_fields = fields


class TelemetrySourceConfigureSerializer(StrictSerializer):
    cluster = serializers.CharField(max_length=63)
    kind = serializers.ChoiceField(choices=SourceKind.choices)
    url_pattern = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")
    prometheus_url = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")
    timeout_s = serializers.FloatField(required=False, default=5.0)
    enabled = serializers.BooleanField(required=False, default=True)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class ChannelSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = NotificationChannel
        fields = ["id", "tenant", "kind", "target", "enabled", "created_at"]
        read_only_fields = fields


class ChannelCreateSerializer(StrictSerializer):
    tenant = serializers.CharField(required=False, allow_null=True, default=None, help_text="empty: on-call's")
    kind = serializers.ChoiceField(choices=ChannelKind.choices)
    target = serializers.CharField(max_length=500)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class IsolationPolicySerializer(serializers.ModelSerializer):
    pool = serializers.SerializerMethodField()

    class Meta:
        model = IsolationPolicy
        fields = [
            "id",
            "pool",
            "cordon_severities",
            "drain_severities",
            "max_nodes_per_hour",
            "max_percent_per_hour",
            "enabled",
        ]
        read_only_fields = fields

    def get_pool(self, policy) -> str | None:
        return str(policy.pool) if policy.pool_id else None


class IsolationPolicySetSerializer(StrictSerializer):
    cluster = serializers.CharField(
        required=False, allow_null=True, default=None, help_text="with `pool`; both empty: the default"
    )
    pool = serializers.CharField(required=False, allow_null=True, default=None)
    cordon_severities = serializers.ListField(
        child=serializers.ChoiceField(choices=Severity.choices), max_length=len(Severity.choices)
    )
    drain_severities = serializers.ListField(
        child=serializers.ChoiceField(choices=Severity.choices), default=list, max_length=len(Severity.choices)
    )
    max_nodes_per_hour = serializers.IntegerField(min_value=0)
    max_percent_per_hour = serializers.FloatField(min_value=0, max_value=100)
    enabled = serializers.BooleanField(default=True)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")
