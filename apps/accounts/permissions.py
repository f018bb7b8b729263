"""The one place that decides who may do what on which tenant.

A user's grants are their memberships: (tenant or console-wide, role). A role allows a set of
actions (roles.ROLE_ACTIONS); a tenant-admin grant covers the tenant's whole subtree. An API token
acts as its user narrowed to the token's own (tenant, role): the effective rights are the
intersection of both, so a token can never do more than its user can today, and revoking a
membership takes effect on every token at once.

Everything else asks through `allowed_tenant_ids`, `has_perm` or `require`; querysets build
`for_user(user, action)` from `allowed_tenant_ids`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Q
from django.utils.translation import gettext as _

from apps.accounts.roles import GLOBAL_ROLES, ROLE_ACTIONS, SUBTREE_ROLES, Action, Role
from apps.core.errors import Conflict, Forbidden

_CACHE_ATTR = "_console_scope"


@dataclass(frozen=True)
class Scope:
    """What a principal may do: console-wide actions, and actions per tenant id (subtrees expanded)."""

    global_actions: frozenset[str] = frozenset()
    tenant_actions: dict[int, frozenset[str]] = field(default_factory=dict)

    def actions_on(self, tenant_id: int | None) -> frozenset[str]:
        if tenant_id is None:
            return self.global_actions
        return self.global_actions | self.tenant_actions.get(tenant_id, frozenset())


def _scope_from_grants(grants: Iterable[tuple[int | None, str]]) -> Scope:
    from apps.accounts.models import Tenant

    global_actions: set[str] = set()
    per_tenant: dict[int, set[str]] = {}
    subtree_roots: dict[int, set[str]] = {}
    for tenant_id, role in grants:
        actions = ROLE_ACTIONS.get(role, frozenset())
        if tenant_id is None:
            global_actions |= actions
        elif role in SUBTREE_ROLES:
            subtree_roots.setdefault(tenant_id, set()).update(actions)
        else:
            per_tenant.setdefault(tenant_id, set()).update(actions)
    if subtree_roots:
        roots = {t.id: t.path for t in Tenant.objects.filter(id__in=subtree_roots).only("id", "path")}
        prefix_q = Q()
        for path in roots.values():
            prefix_q |= Q(path__startswith=path)
        if roots:
            for tenant_id, path in Tenant.objects.filter(prefix_q).values_list("id", "path"):
                for root_id, root_path in roots.items():
                    if path.startswith(root_path):
                        per_tenant.setdefault(tenant_id, set()).update(subtree_roots[root_id])
    return Scope(frozenset(global_actions), {key: frozenset(value) for key, value in per_tenant.items()})


def _intersect(user_scope: Scope, token_scope: Scope) -> Scope:
    global_actions = user_scope.global_actions & token_scope.global_actions
    per_tenant: dict[int, frozenset[str]] = {}
    for tenant_id in set(user_scope.tenant_actions) | set(token_scope.tenant_actions):
        actions = (user_scope.actions_on(tenant_id) & token_scope.actions_on(tenant_id)) - global_actions
        if actions:
            per_tenant[tenant_id] = actions
    return Scope(global_actions, per_tenant)


# The user's memberships as (tenant id, role): set by the API token lookup, which reads them in the same statement
# as the token, or by `user_grants` when it reads them; `forget_scope` drops them.
GRANTS_ATTR = "_prefetched_grants"


def user_grants(user) -> list[tuple[int | None, str]]:
    grants = getattr(user, GRANTS_ATTR, None)
    if grants is None:
        # Read on every request: plain SQL, without the ORM's per-call query compilation.
        with connection.cursor() as cursor:
            cursor.execute("SELECT tenant_id, role FROM accounts_membership WHERE user_id = %s", [user.pk])
            grants = list(cursor.fetchall())
        setattr(user, GRANTS_ATTR, list(grants))  # the memberships as read, for whoever lists them (the home page)
    else:
        grants = list(grants)
    if user.is_superuser:
        grants.append((None, Role.PLATFORM_ADMIN))
    return grants


def scope_for(user) -> Scope:
    """The principal's scope, computed once per user object (i.e. once per request)."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return Scope()
    cached = getattr(user, _CACHE_ATTR, None)
    if cached is not None:
        return cached
    scope = _scope_from_grants(user_grants(user))
    token = getattr(user, "api_token", None)
    if token is not None:
        scope = _intersect(scope, _scope_from_grants([(token.tenant_id, token.role)]))
    setattr(user, _CACHE_ATTR, scope)
    return scope


def forget_scope(user) -> None:
    """Drop the cached scope after the user's memberships changed."""
    for attr in (_CACHE_ATTR, GRANTS_ATTR):
        if user is not None and hasattr(user, attr):
            delattr(user, attr)


def allowed_tenant_ids(user, action: str) -> set[int] | None:
    """Tenant ids on which `user` may `action`; None means every tenant."""
    scope = scope_for(user)
    if action in scope.global_actions:
        return None
    return {tenant_id for tenant_id, actions in scope.tenant_actions.items() if action in actions}


def has_perm(user, action: str, tenant=None) -> bool:
    """May `user` do `action` on `tenant` (a Tenant, an id, or None for a console-wide action)?"""
    tenant_id = getattr(tenant, "pk", tenant)
    return action in scope_for(user).actions_on(tenant_id)


def require(user, action: str, tenant=None, message: str | None = None) -> None:
    """Raise Forbidden unless `has_perm`; the message says which action on which tenant was missing. An archived
    tenant is read-only: any action but viewing it is a Conflict saying so, whoever asks."""
    if not has_perm(user, action, tenant):
        where = _("tenant %(slug)s") % {"slug": tenant} if tenant is not None else _("the console")
        raise Forbidden(message or _("You may not %(action)s on %(where)s.") % {"action": action, "where": where})
    if action != Action.VIEW:
        require_live(tenant)


def require_live(tenant) -> None:
    """Raise Conflict (409 `archived`) if `tenant` (a Tenant or None) is archived."""
    if getattr(tenant, "archived_at", None) is not None:
        raise Conflict(
            _("Tenant %(slug)s is archived: it is read-only until a platform admin unarchives it.")
            % {"slug": tenant.slug},
            {"tenant": _("Archived.")},
            code="archived",
        )


def grantable_roles(user, tenant) -> list[str]:
    """Roles `user` may hand out on `tenant` (None: console-wide). Managers grant tenant roles; admins all."""
    if has_perm(user, Action.ADMINISTER, None):
        return list(Role.values) if tenant is None else [r for r in Role.values if r not in GLOBAL_ROLES]
    if tenant is not None and has_perm(user, Action.MANAGE, tenant):
        return [Role.TENANT_ADMIN, Role.MEMBER, Role.VIEWER]
    return []
