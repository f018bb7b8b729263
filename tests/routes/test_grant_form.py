"""The Memberships page's grant form: its user suggestions are the people the granter may already see, never every
account of the console (another tenant's people and service accounts); anyone else is granted by exact username."""

from __future__ import annotations

import re

from apps.accounts.models import Membership
from tests.routes.matrix import api_client


def _suggested(world, persona: str) -> set[str]:
    page = api_client(world, persona).get("/accounts/memberships/").content.decode()
    datalist = re.search(r'<datalist id="grant_user_suggestions">(.*?)</datalist>', page, re.S)
    assert datalist, "the grant form offers no suggestions"
    return set(re.findall(r'<option value="([^"]*)">', datalist.group(1)))


def test_a_tenant_admin_is_offered_their_tenants_people_only(world, db):
    offered = _suggested(world, "tenant_admin_a")
    assert {"member-a", world.own.user.username, world.own.service_account.username} <= offered
    assert not {u for u in offered if u.startswith("bravo-") or u == "member-b"}
    assert world.loner.username not in offered


def test_a_platform_admin_is_offered_everyone(world, db):
    offered = _suggested(world, "platform_admin")
    assert {"member-a", "member-b", world.foreign.user.username, world.loner.username} <= offered


def test_someone_not_offered_is_granted_by_username(world, db):
    response = api_client(world, "tenant_admin_a").post(
        "/accounts/memberships/", {"user": world.loner.username, "tenant": world.own.tenant.pk, "role": "viewer"}
    )
    assert response.status_code == 302, response.content[:500]
    assert Membership.objects.filter(user=world.loner, tenant=world.own.tenant, role="viewer").exists()


def test_an_unknown_username_is_refused_on_the_field(world, db):
    response = api_client(world, "tenant_admin_a").post(
        "/accounts/memberships/", {"user": "nobody-here", "tenant": world.own.tenant.pk, "role": "viewer"}
    )
    assert response.status_code == 200 and "No active user nobody-here." in response.content.decode()
