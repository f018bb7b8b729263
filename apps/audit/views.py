"""The audit log pages."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_safe

from apps.audit.filtersets import AuditEventFilterSet
from apps.audit.models import AuditEvent
from apps.core.tables import Column
from apps.core.views import ScopedListView


class AuditEventListView(ScopedListView):
    model = AuditEvent
    filterset_class = AuditEventFilterSet
    template_name = "audit/auditevent_list.html"
    columns = [
        Column("time", _("Time"), order_by="time"),
        Column("actor", _("Actor"), order_by="actor_label", csv="actor_label"),
        Column("action", _("Action"), order_by="action"),
        Column("target", _("Target"), order_by=("target_type", "target_label"), csv="target_label"),
        Column("target_type", _("Target type"), csv="target_type", shown=False),
        Column("target_id", _("Target id"), csv="target_id", shown=False),
        Column("tenant", _("Tenant"), order_by="tenant_label", csv="tenant_label"),
        Column("reason", _("Reason")),
        Column("request", _("Request"), csv="request_id"),
    ]
    default_sort = "-time"
    csv_name = "audit-events"


@require_safe
@login_required
def audit_event_detail(request, pk: int):
    event = get_object_or_404(AuditEvent.objects.for_user(request.user, "view"), pk=pk)
    before, after = event.before or {}, event.after or {}
    rows = [
        (key, before.get(key), after.get(key), before.get(key) != after.get(key))
        for key in sorted(set(before) | set(after))
    ]
    return render(request, "audit/auditevent_detail.html", {"event": event, "rows": rows})
