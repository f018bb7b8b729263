"""The people every permission test is written for, built through the services like real data.

Tenants: organization A (`a`) with a team (`a-team`); organization B (`b`).
Personas: platform admin, tenant admin of A, member of A, member of B, on-call, viewer of A,
a service account of A, and a member-role token scoped to A.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from apps.accounts import services as accounts
from apps.accounts.models import ApiToken, Tenant, User
from apps.accounts.roles import Role
from apps.tenancy import services as tenancy

PASSWORD = "correct-horse-battery-staple"


@dataclass
class Personas:
    a: Tenant
    a_team: Tenant
    b: Tenant
    platform_admin: User
    tenant_admin_a: User
    member_a: User
    member_b: User
    oncall: User
    viewer_a: User
    ci_a: User  # service account of A
    token_a: ApiToken  # member token of ci_a, scoped to A
    token_a_raw: str

    def user(self, name: str) -> User:
        return getattr(self, name)


def build_personas() -> Personas:
    with transaction.atomic():
        admin = accounts.bootstrap_platform_admin(username="root", password=PASSWORD)
    a = tenancy.create_tenant(admin, name="Org A", slug="a")
    a_team = tenancy.create_tenant(admin, name="Team A1", slug="a-team", parent=a)
    b = tenancy.create_tenant(admin, name="Org B", slug="b")

    def person(username: str, role: str, tenant: Tenant | None) -> User:
        user = accounts.create_user(admin, username=username, password=PASSWORD)
        accounts.grant_membership(admin, user=user, tenant=tenant, role=role)
        return User.objects.get(pk=user.pk)

    tenant_admin_a = person("ta-a", Role.TENANT_ADMIN, a)
    member_a = person("member-a", Role.MEMBER, a)
    member_b = person("member-b", Role.MEMBER, b)
    oncall = person("oncall", Role.ONCALL, None)
    viewer_a = person("viewer-a", Role.VIEWER, a)
    ci_a = accounts.create_service_account(tenant_admin_a, username="ci-a", tenant=a, role=Role.MEMBER)
    token, raw = accounts.issue_token(tenant_admin_a, user=ci_a, name="ci", tenant=a, role=Role.MEMBER)
    return Personas(
        a=a,
        a_team=a_team,
        b=b,
        platform_admin=User.objects.get(pk=admin.pk),
        tenant_admin_a=tenant_admin_a,
        member_a=member_a,
        member_b=member_b,
        oncall=oncall,
        viewer_a=viewer_a,
        ci_a=User.objects.get(pk=ci_a.pk),
        token_a=token,
        token_a_raw=raw,
    )


def fresh(user: User) -> User:
    """A new instance, so no permission scope cached on the old one leaks into the next request."""
    return User.objects.get(pk=user.pk)
