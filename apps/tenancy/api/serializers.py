from rest_framework import serializers

from apps.accounts.api.fields import TenantField
from apps.accounts.models import Tenant
from apps.core.api.serializers import StrictModelSerializer, StrictSerializer


class TenantSerializer(StrictModelSerializer):
    parent = TenantField(allow_null=True, required=False)
    depth = serializers.IntegerField(read_only=True)
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=2000)

    class Meta:
        model = Tenant
        fields = ["id", "name", "slug", "parent", "description", "depth", "created_at", "archived_at", "reason"]
        read_only_fields = ["id", "created_at", "archived_at"]
        extra_kwargs = {"slug": {"validators": []}}  # uniqueness is the service's job (one validation path)


class TenantArchiveSerializer(StrictSerializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")
