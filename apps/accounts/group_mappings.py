"""Which roles a person's identity provider groups give, through the platform admins' GroupMappings.

Pure: `roles_from_groups` reads the mappings and the tenants it names and decides, `plan_memberships` turns that
into steps on a person's memberships; `services.sync_idp_memberships` applies them at each log-in and the group
mappings page previews them. When several groups give roles on the same tenant (or console-wide), the
strongest wins (ROLE_STRENGTH). A pattern whose tenant does not exist, or whose role does not fit (a tenant role
console-wide, a console-wide role on a tenant), gives nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.accounts.models import GroupMapping, Membership, MembershipSource, Tenant
from apps.accounts.roles import GLOBAL_ROLES, TENANT_ROLES, Role

# Which role wins when groups give several on one place.
ROLE_STRENGTH = [Role.VIEWER, Role.MEMBER, Role.ONCALL, Role.TENANT_ADMIN, Role.PLATFORM_ADMIN]


@dataclass(frozen=True)
class Grant:
    tenant_id: int | None
    role: str
    group: str  # the group that gave it


def pattern_regex(pattern: str) -> re.Pattern:
    """`gpu:{tenant}:{role}` as a regular expression with named groups, the rest taken literally."""
    parts = re.split(r"(\{tenant\}|\{role\})", pattern)
    out = []
    for part in parts:
        if part == "{tenant}":
            out.append(r"(?P<tenant>[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)")
        elif part == "{role}":
            out.append(r"(?P<role>[a-z-]+)")
        else:
            out.append(re.escape(part))
    return re.compile("".join(out))


def _fits(role: str, tenant_id: int | None) -> bool:
    if role not in Role.values:
        return False
    if tenant_id is None:
        return role not in TENANT_ROLES
    return role not in GLOBAL_ROLES


def roles_from_groups(groups: list[str], mappings: list[GroupMapping] | None = None) -> dict[int | None, Grant]:
    """{tenant id (None: console-wide): the strongest Grant} that `groups` give."""
    mappings = list(GroupMapping.objects.all()) if mappings is None else mappings
    groups = [g for g in groups if isinstance(g, str)]
    found: list[Grant] = []
    wanted_slugs: dict[str, list[tuple[str, str, GroupMapping]]] = {}
    for mapping in mappings:
        if not mapping.is_pattern:
            if mapping.group in groups and _fits(mapping.role, mapping.tenant_id):
                found.append(Grant(mapping.tenant_id, mapping.role, mapping.group))
            continue
        regex = pattern_regex(mapping.group)
        for group in groups:
            match = regex.fullmatch(group)
            if not match:
                continue
            role = match.groupdict().get("role") or mapping.role
            slug = match.groupdict().get("tenant")
            if slug is None:
                if _fits(role, None):
                    found.append(Grant(None, role, group))
            else:
                wanted_slugs.setdefault(slug, []).append((role, group, mapping))
    if wanted_slugs:
        ids = dict(Tenant.objects.filter(slug__in=wanted_slugs).values_list("slug", "id"))
        for slug, hits in wanted_slugs.items():
            for role, group, _mapping in hits:
                if slug in ids and _fits(role, ids[slug]):
                    found.append(Grant(ids[slug], role, group))
    best: dict[int | None, Grant] = {}
    for grant in found:
        current = best.get(grant.tenant_id)
        if current is None or ROLE_STRENGTH.index(grant.role) > ROLE_STRENGTH.index(current.role):
            best[grant.tenant_id] = grant
    return best


@dataclass(frozen=True)
class Step:
    """What a log-in does at one place (a tenant, or console-wide) for one person.

    change: "grant" (a new identity-provider membership), "change" (its role), "revoke" (no group gives it any
    more), "same" (the groups give what is held), "hand-made" (a membership granted by hand: never touched)."""

    tenant_id: int | None
    change: str
    held: Membership | None
    grant: Grant | None


def plan_memberships(held: dict[int | None, Membership], wanted: dict[int | None, Grant]) -> list[Step]:
    """The steps that make `held` (a person's memberships by place) what `wanted` (`roles_from_groups`) says.
    `services.sync_idp_memberships` applies them; the group mappings page previews them."""
    steps = []
    for tenant_id, membership in held.items():
        grant = wanted.get(tenant_id)
        if membership.source != MembershipSource.IDP:
            change = "hand-made"
        elif grant is None:
            change = "revoke"
        else:
            change = "same" if grant.role == membership.role else "change"
        steps.append(Step(tenant_id, change, membership, grant))
    steps += [Step(t, "grant", None, g) for t, g in wanted.items() if t not in held]
    return steps
