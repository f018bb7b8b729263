from rest_framework import serializers

from apps.audit.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_label", read_only=True)
    tenant = serializers.CharField(source="tenant_label", read_only=True)

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "time",
            "actor",
            "actor_id",
            "token_id",
            "action",
            "target_type",
            "target_id",
            "target_label",
            "tenant",
            "reason",
            "before",
            "after",
            "request_id",
        ]
        read_only_fields = fields
