from django.contrib import admin

from apps.core.admin_base import ReadOnlyAdmin
from apps.tenancy.models import Tenant


@admin.register(Tenant)
class TenantAdmin(ReadOnlyAdmin):
    """Tenants are edited on the Tenants page: moving one re-roots its subtree, which the service does."""

    list_display = ["name", "slug", "parent", "path", "created_at"]
    search_fields = ["name", "slug"]
