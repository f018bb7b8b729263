from rest_framework import serializers

from apps.operations.models import Operation


class OperationSerializer(serializers.ModelSerializer):
    actor = serializers.SlugRelatedField(slug_field="username", read_only=True)
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Operation
        fields = [
            "id",
            "kind",
            "status",
            "progress",
            "steps_done",
            "steps_total",
            "steps_label",
            "target_type",
            "target_id",
            "target_label",
            "tenant",
            "actor",
            "reason",
            "params",
            "result",
            "log",
            "error",
            "attempts",
            "created_at",
            "started_at",
            "heartbeat_at",
            "finished_at",
        ]
        read_only_fields = fields
