from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.accounts.models import Tenant
from apps.core.api.views import ScopedViewSetMixin
from apps.tenancy import services
from apps.tenancy.api.serializers import TenantArchiveSerializer, TenantSerializer
from apps.tenancy.filtersets import TenantFilterSet


class TenantViewSet(ScopedViewSetMixin, viewsets.ModelViewSet):
    """Tenants you can see. Platform admins create organizations; tenant admins create and edit teams below theirs."""

    model = Tenant
    serializer_class = TenantSerializer
    filterset_class = TenantFilterSet
    lookup_field = "slug"
    select_related = ("parent",)
    ordering_fields = ["path", "name", "slug", "created_at"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def perform_create(self, serializer):
        serializer.instance = services.create_tenant(self.request.user, **serializer.validated_data)

    def perform_update(self, serializer):
        data = dict(serializer.validated_data)
        reason = data.pop("reason", "")
        serializer.instance = services.update_tenant(self.request.user, serializer.instance, reason=reason, **data)

    @extend_schema(responses={204: None})
    def destroy(self, request, *args, **kwargs):
        services.delete_tenant(request.user, self.get_object(), reason=request.query_params.get("reason", ""))
        return Response(status=status.HTTP_204_NO_CONTENT)

    def filter_queryset(self, queryset):
        """Filters (and hiding archived tenants unless `?archived=` asks) are for the list; a tenant's own URL
        finds it archived or not, as its statements and audit events link to it."""
        return super().filter_queryset(queryset) if self.action == "list" else queryset

    @extend_schema(request=TenantArchiveSerializer, responses=TenantSerializer)
    @action(detail=True, methods=["post"])
    def archive(self, request, slug=None):
        """Archive a tenant that cannot be deleted for its history: hidden from lists, read-only (409 `archived`
        for any change in it), kept for its statements. Platform admins."""
        return self._archived(request, services.archive_tenant)

    @extend_schema(request=TenantArchiveSerializer, responses=TenantSerializer)
    @action(detail=True, methods=["post"])
    def unarchive(self, request, slug=None):
        """Make an archived tenant live again. Platform admins."""
        return self._archived(request, services.unarchive_tenant)

    def _archived(self, request, change):
        body = TenantArchiveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        tenant = change(request.user, self.get_object(), reason=body.validated_data["reason"])
        return Response(TenantSerializer(tenant).data)
