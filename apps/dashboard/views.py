"""The home page: the fleet at a glance (apps/dashboard/overview.py), then your roles, activity and operations."""

from types import SimpleNamespace

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_safe

from apps.accounts.context_processors import SWITCHER_LIMIT
from apps.accounts.models import Tenant
from apps.accounts.permissions import GRANTS_ATTR, scope_for, user_grants
from apps.accounts.roles import Action
from apps.audit.models import AuditEvent
from apps.dashboard.overview import fleet_overview, overview_tenants
from apps.operations.models import Operation


@require_safe
@login_required
def home(request):
    user = request.user
    current = getattr(request, "current_tenant", None)
    # Read once: the overview's panels, the tenant switcher and "Your roles" all name tenants.
    tenants = overview_tenants()
    return render(
        request,
        "dashboard/home.html",
        {
            "overview": fleet_overview(user, current if current else None, tenants=tenants),
            "memberships": your_roles(user, tenants),
            "switchable_tenants": switchable(user, tenants),
            "events": AuditEvent.objects.for_user(user, "view")[:10],
            "operations": Operation.objects.for_user(user, "view").select_related("tenant")[:10],
        },
    )


def your_roles(user, tenants: dict[int, dict]) -> list[SimpleNamespace]:
    """The user's memberships (role, tenant), from the grants their scope was computed from, ordered as the
    memberships are (by tenant path, console-wide last as PostgreSQL sorts NULLs)."""
    grants = getattr(user, GRANTS_ATTR, None)
    if grants is None:
        user_grants(user)  # reads and keeps them on the user
        grants = getattr(user, GRANTS_ATTR)
    roles = []
    for tenant_id, role in grants:
        info = tenants.get(tenant_id) if tenant_id is not None else None
        if tenant_id is not None and info is None:
            continue
        tenant = SimpleNamespace(name=info["name"], slug=info["slug"], pk=tenant_id) if info else None
        roles.append(SimpleNamespace(role=role, tenant=tenant, path=info["path"] if info else None))
    return sorted(roles, key=lambda r: (r.path is None, r.path or "", r.role))


def switchable(user, tenants: dict[int, dict]) -> list[Tenant]:
    """What the shell's tenant switcher offers (apps/accounts/context_processors.py), from the tenants read."""
    scope = scope_for(user)
    everyone = Action.VIEW in scope.global_actions
    offered = [
        Tenant(id=t, name=info["name"], slug=info["slug"], path=info["path"])
        for t, info in tenants.items()
        if info["archived_at"] is None and (everyone or t in scope.tenant_actions)
    ]
    return offered[:SWITCHER_LIMIT]
