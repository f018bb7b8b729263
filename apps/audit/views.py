"""The audit log pages."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from apps.audit.filtersets import AuditEventFilterSet
from apps.audit.models import AuditEvent
from apps.core.views import ScopedListView


class AuditEventListView(ScopedListView):
    model = AuditEvent
    filterset_class = AuditEventFilterSet
    template_name = "audit/auditevent_list.html"


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
