"""Template context for the shell: the tenant switcher and what the navigation may show."""

from __future__ import annotations

from django.http import HttpRequest

from apps.accounts.permissions import has_perm, scope_for
from apps.accounts.roles import Action

SWITCHER_LIMIT = 200


def tenant_context(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    def switchable():
        from apps.accounts.models import Tenant

        scope = scope_for(user)
        qs = (
            Tenant.objects.all()
            if Action.VIEW in scope.global_actions
            else Tenant.objects.filter(id__in=scope.tenant_actions)
        )
        return list(qs.live().only("id", "name", "slug", "path")[:SWITCHER_LIMIT])  # archived: not offered

    current = getattr(request, "current_tenant", None)
    return {
        "switchable_tenants": switchable,  # callable: evaluated only when the template renders the switcher
        "current_tenant": current if current else None,
        "can_administer": has_perm(user, Action.ADMINISTER),
        "can_operate": has_perm(user, Action.OPERATE),
    }
