"""The tenant the user is working in, chosen with the tenant switcher and kept in the session."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject

SESSION_KEY = "current_tenant_id"


def _current_tenant(request: HttpRequest):
    from apps.accounts.models import Tenant
    from apps.accounts.permissions import has_perm

    tenant_id = request.session.get(SESSION_KEY) if hasattr(request, "session") else None
    if not tenant_id or not request.user.is_authenticated:
        return None
    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None or not has_perm(request.user, "view", tenant):
        return None
    return tenant


class CurrentTenantMiddleware:
    """Set `request.current_tenant` (a Tenant or None for "all my tenants"), evaluated lazily."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.current_tenant = SimpleLazyObject(lambda: _current_tenant(request))
        return self.get_response(request)
