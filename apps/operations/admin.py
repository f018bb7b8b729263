from django.contrib import admin

from apps.core.admin_site import ReadOnlyAdmin
from apps.operations.models import Operation


@admin.register(Operation)
class OperationAdmin(ReadOnlyAdmin):
    list_display = ["id", "kind", "status", "progress", "target_label", "tenant", "actor", "created_at"]
    list_filter = ["status", "kind"]
