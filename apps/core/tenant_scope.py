"""Which tenants a user may act on, for the apps below apps.accounts.

Permissions (roles, memberships, the tenant tree) are decided in apps.accounts, which sits above
apps.audit in the layers. The audit trail is still tenant-scoped: its querysets and its tenant filter
must show a user only the tenants they may see. Rather than reach up into accounts, audit asks this
module, and accounts registers its answers here in its `AppConfig.ready` (before any request or
task runs):

- `allowed_tenant_ids(user, action)`: the ids of the tenants on which `user` may `action`, or None
  for every tenant (the same contract as apps.accounts.permissions.allowed_tenant_ids, which is
  what gets registered);
- `visible_tenants(request)`: the tenant choices a filter form may offer (apps.accounts.filtersets).

Nothing registered means nothing is allowed to be guessed: both raise instead of answering "every
tenant", so a missing registration can never widen what a user sees.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet

_allowed_tenant_ids: Callable[[Any, str], set[int] | None] | None = None
_visible_tenants: Callable[[Any], QuerySet] | None = None


def register(
    *,
    allowed_tenant_ids: Callable[[Any, str], set[int] | None],
    visible_tenants: Callable[[Any], QuerySet],
) -> None:
    """Install the permission answers; called once by apps.accounts' AppConfig.ready."""
    global _allowed_tenant_ids, _visible_tenants
    _allowed_tenant_ids = allowed_tenant_ids
    _visible_tenants = visible_tenants


def _missing() -> ImproperlyConfigured:
    return ImproperlyConfigured("No tenant scope registered: apps.accounts must be in INSTALLED_APPS.")


def allowed_tenant_ids(user, action: str) -> set[int] | None:
    """Tenant ids on which `user` may `action`; None means every tenant."""
    if _allowed_tenant_ids is None:
        raise _missing()
    return _allowed_tenant_ids(user, action)


def visible_tenants(request) -> QuerySet:
    """The tenants a filter may offer as choices to the user of `request` (none without a request)."""
    if _visible_tenants is None:
        raise _missing()
    return _visible_tenants(request)
