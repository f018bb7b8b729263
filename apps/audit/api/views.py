from apps.audit.api.serializers import AuditEventSerializer
from apps.audit.filtersets import AuditEventFilterSet
from apps.audit.models import AuditEvent
from apps.core.api.views import ScopedReadOnlyViewSet


class AuditEventViewSet(ScopedReadOnlyViewSet):
    """The audit trail, newest first. Read-only: no interface edits or deletes events."""

    model = AuditEvent
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilterSet
    ordering_fields = ["time"]
