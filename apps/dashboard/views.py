"""The home page: your tenants and roles, recent audit events and operations."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_safe

from apps.audit.models import AuditEvent
from apps.operations.models import Operation


@require_safe
@login_required
def home(request):
    user = request.user
    return render(
        request,
        "dashboard/home.html",
        {
            "memberships": user.memberships.select_related("tenant"),
            "events": AuditEvent.objects.for_user(user, "view")[:10],
            "operations": Operation.objects.for_user(user, "view").select_related("tenant")[:10],
        },
    )
