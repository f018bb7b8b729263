"""What each persona may do, written from the permission model, not read from the code under test.

The grants are the personas' memberships (tests/utils/personas.py); what a role allows is `ROLE_ACTIONS`
(apps/accounts/roles.py); the scope rules are docs/permissions.md's: console-wide roles cover every tenant, only
`tenant-admin` extends down the tree, and a token acts as the intersection of its user's rights and its own
(tenant, role). `apps/accounts/permissions.py`, which applies the same model in the code, is deliberately not used.

A route's expected outcome for a persona is one of:

- ``OK``: allowed, the route answers as designed (its declared statuses);
- ``HIDDEN``: the object is outside the persona's view: 404, so other tenants' ids and names do not leak;
- ``FORBIDDEN``: the persona sees the object but may not do this: 403 (a page: refused, nothing changed);
- ``DENIED``: either of the two, where the tenant is named in the request body rather than the path;
- ``LOGIN``: not authenticated: 401 from the API, a redirect to the login page from a page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from apps.accounts.roles import ROLE_ACTIONS, SUBTREE_ROLES, Action, Role

OK, HIDDEN, FORBIDDEN, DENIED, LOGIN = "ok", "hidden", "forbidden", "denied", "login"

# The tenant tree of the world (tests/routes/world.py): slug -> parent slug.
PARENT: dict[str, str | None] = {
    "a": None,
    "a-team": "a",
    "alpha-empty": "a",
    "b": None,
    "bravo-empty": "b",
}

# Each persona's memberships: (tenant slug, or None for console-wide; role).
GRANTS: dict[str, list[tuple[str | None, str]]] = {
    "platform_admin": [(None, Role.PLATFORM_ADMIN)],
    "tenant_admin_a": [("a", Role.TENANT_ADMIN)],
    "member_a": [("a", Role.MEMBER)],
    "member_b": [("b", Role.MEMBER)],
    "oncall": [(None, Role.ONCALL)],
    "viewer_a": [("a", Role.VIEWER)],
    # The token's user: the service account ci-a, a member of A.
    "token_a": [("a", Role.MEMBER)],
    "anonymous": [],
}
# The token's own scope: a member token on A.
TOKEN_SCOPES: dict[str, tuple[str | None, str]] = {"token_a": ("a", Role.MEMBER)}

PAGE_PERSONAS = ["anonymous", "platform_admin", "tenant_admin_a", "member_a", "member_b", "oncall", "viewer_a"]
API_PERSONAS = [*PAGE_PERSONAS, "token_a"]
# Who must never see B's rows, and who must never see A's.
SEES_ONLY_A = {"tenant_admin_a", "member_a", "viewer_a", "token_a"}
SEES_ONLY_B = {"member_b"}


def _ancestors(slug: str) -> list[str]:
    chain = []
    while slug is not None:
        chain.append(slug)
        slug = PARENT[slug]
    return chain


def _actions_from(grants: list[tuple[str | None, str]], tenant: str | None) -> frozenset[str]:
    actions: set[str] = set()
    for granted_on, role in grants:
        if granted_on is None or (
            tenant is not None
            and (granted_on == tenant or (role in SUBTREE_ROLES and granted_on in _ancestors(tenant)))
        ):
            actions |= ROLE_ACTIONS[role]
    return frozenset(actions)


def actions(persona: str, tenant: str | None = None) -> frozenset[str]:
    """What `persona` may do on `tenant` (a slug), or console-wide with None."""
    allowed = _actions_from(GRANTS[persona], tenant)
    if persona in TOKEN_SCOPES:
        allowed &= _actions_from([TOKEN_SCOPES[persona]], tenant)
    return allowed


def may(persona: str, action: str, tenant: str | None = None) -> bool:
    return action in actions(persona, tenant)


def has_any_role(persona: str) -> bool:
    return bool(GRANTS[persona])


#
# Rules: how a route decides, in the model's terms
#


@dataclass(frozen=True)
class Rule:
    """`see`: who sees the route's object (None: anyone logged in; "view"/"manage": that action on its tenant).
    `need`: what the request needs: (action, where) with where "tenant" (the object's tenant), "console", or
    "parent" (the parent's `manage` for a team, the console's `administer` for an organization).
    `custom`: a function (persona, tenant) -> outcome for the few rules the above cannot say."""

    public: bool = False
    see: str | None = None
    need: tuple[str, str] | None = None
    custom: Callable[[str, str | None], str] | None = None

    def outcome(self, persona: str, tenant: str | None) -> str:
        if self.public:
            return OK
        if not has_any_role(persona):
            return LOGIN
        if self.custom is not None:
            return self.custom(persona, tenant)
        if self.see is not None and tenant is not None and not may(persona, self.see, tenant):
            return HIDDEN
        if self.need is not None:
            action, where = self.need
            if where == "console":
                allowed = may(persona, action, None)
            elif where == "tenant":
                allowed = may(persona, action, tenant)
            elif where == "parent":
                parent = PARENT[tenant]
                allowed = may(persona, Action.MANAGE, parent) if parent else may(persona, Action.ADMINISTER, None)
            else:
                raise ValueError(where)
            if not allowed:
                return FORBIDDEN
        return OK


PUBLIC = Rule(public=True)
LOGGED_IN = Rule()  # any authenticated person; lists inside are scoped (checked by the leak test)
VIEW = Rule(see=Action.VIEW)  # the object's tenant must be in view


def view_and(action: str, where: str = "tenant") -> Rule:
    """The object must be in view (else 404); the request needs `action` (else 403)."""
    return Rule(see=Action.VIEW, need=(action, where))


def console(action: str) -> Rule:
    """A console-wide action on shared (fleet, billing, policy) data: 403 without it."""
    return Rule(need=(action, "console"))


def _token_rows(persona: str, tenant: str | None) -> str:
    """Tokens: your own, plus those of service accounts of tenants you manage; platform admins see all.
    The world's tokens belong to the service accounts alpha-ci (A) and bravo-ci (B); token_a belongs to ci-a."""
    return OK if may(persona, Action.MANAGE, tenant) else HIDDEN


TOKENS = Rule(custom=_token_rows)


def _issue_viewer_token(persona: str, tenant: str | None) -> str:
    """Issuing yourself a `viewer` token on `tenant` needs every action of the role there; a request made with a
    token may create one only where that token can `manage`."""
    if persona in TOKEN_SCOPES and not may(persona, Action.MANAGE, tenant):
        return DENIED
    return OK if ROLE_ACTIONS[Role.VIEWER] <= actions(persona, tenant) else DENIED


ISSUE_VIEWER_TOKEN = Rule(custom=_issue_viewer_token)


# Budgets (GPU and money): a team's is set by the managers of its parent, an organization's by platform admins.
BUDGET = Rule(see=Action.VIEW, need=(Action.MANAGE, "parent"))


def _channels(persona: str, tenant: str | None) -> str:
    """A tenant's notification channels are its managers' to see and change."""
    return OK if may(persona, Action.MANAGE, tenant) else HIDDEN


CHANNELS = Rule(custom=_channels)


def _trusts(persona: str, tenant: str | None) -> str:
    """A service account's federated trusts are its tenant's managers' to see and change (docs/sso.md)."""
    return OK if may(persona, Action.MANAGE, tenant) else HIDDEN


TRUSTS = Rule(custom=_trusts)


#
# Known bugs: the pairs a leak touches
#


def one_tenant_personas(reason: str, among: list[str], target: str = "shared") -> dict[tuple[str, str], str]:
    """Every persona (`among` those of the matrix) whose view is one tenant's, on a shared answer that shows the
    other tenant's rows."""
    return {(persona, target): reason for persona in among if persona in SEES_ONLY_A | SEES_ONLY_B}


def across(reason: str, among: list[str]) -> dict[tuple[str, str], str]:
    """A fleet object seen from both sides ("own": the one running A's work, "foreign": B's): A's personas on
    the one running B's work, B's member on A's (`among` the personas of the matrix)."""
    pairs = {(persona, "foreign") for persona in SEES_ONLY_A} | {(persona, "own") for persona in SEES_ONLY_B}
    return {(persona, target): reason for persona, target in pairs if persona in among}
