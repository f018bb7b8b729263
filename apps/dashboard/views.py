"""The home page: the fleet at a glance (apps/dashboard/overview.py), then your roles, activity and operations."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_safe

from apps.audit.models import AuditEvent
from apps.dashboard.overview import fleet_overview
from apps.operations.models import Operation


@require_safe
@login_required
def home(request):
    user = request.user
    current = getattr(request, "current_tenant", None)
    return render(
        request,
        "dashboard/home.html",
        {
            "overview": fleet_overview(user, current if current else None),
            "memberships": user.memberships.select_related("tenant"),
            "events": AuditEvent.objects.for_user(user, "view")[:10],
            "operations": Operation.objects.for_user(user, "view").select_related("tenant")[:10],
        },
    )
