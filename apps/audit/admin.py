from django.contrib import admin

from apps.audit.models import AuditEvent
from apps.core.admin_base import ReadOnlyAdmin


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["time", "actor_label", "action", "target_type", "target_label", "tenant_label", "request_id"]
    list_filter = ["action", "target_type"]
    search_fields = ["actor_label", "target_label", "request_id"]
    date_hierarchy = "time"
