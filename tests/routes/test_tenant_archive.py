"""A tenant with history cannot be deleted (its statements refer to it), so it can be archived: hidden from lists
and pickers, read-only, kept for its statements; platform admins archive and unarchive it (API and page)."""

from __future__ import annotations

from django.test import Client

from apps.accounts.models import Tenant
from apps.audit.models import AuditEvent
from apps.tenancy.models import Admission
from tests.routes.matrix import api_client


def _slugs(client, query: str = "") -> set[str]:
    return {row["slug"] for row in client.get(f"/api/v1/tenants/?page_size=1000{query}").json()["results"]}


def test_an_archived_tenant_is_hidden_read_only_and_can_come_back(world, db):
    admin, manager = api_client(world, "platform_admin"), api_client(world, "tenant_admin_a")
    team = world.own.empty_team  # a team of A: A's tenant admin manages it
    page = Client()
    page.force_login(world.personas.tenant_admin_a)
    assert f'value="{team.slug}"' in page.get("/").content.decode()  # in the tenant switcher while live
    events = AuditEvent.objects.count()

    response = admin.post(f"/api/v1/tenants/{team.slug}/archive/", {"reason": "team disbanded"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["archived_at"]
    event = AuditEvent.objects.order_by("-id").first()
    assert AuditEvent.objects.count() == events + 1 and event.action == "tenant.archive"
    assert event.reason == "team disbanded"

    # Hidden from lists (unless asked for), still found by its own URL.
    assert team.slug not in _slugs(admin) and team.slug not in _slugs(manager)
    assert _slugs(admin, "&archived=true") == {team.slug}
    assert team.slug not in _slugs(admin, "&archived=false") and world.own.tenant.slug in _slugs(
        admin, "&archived=false"
    )
    assert admin.get(f"/api/v1/tenants/{team.slug}/").json()["archived_at"]

    # Read-only for everyone, platform admins included: 409 `archived`, nothing changed.
    events = AuditEvent.objects.count()
    attempts = [
        (manager, "/api/v1/queues/", {"tenant": team.slug, "name": "rt-late"}),
        (admin, "/api/v1/queues/", {"tenant": team.slug, "name": "rt-late"}),
        (manager, "/api/v1/memberships/", {"user": "loner", "tenant": team.slug, "role": "member"}),
        (manager, "/api/v1/tenants/", {"name": "RT child", "slug": "rt-child", "parent": team.slug}),
        (manager, "/api/v1/service-accounts/", {"username": "rt-ci", "tenant": team.slug}),
    ]
    for client, path, body in attempts:
        response = client.post(path, body, format="json")
        assert response.status_code == 409 and response.json()["code"] == "archived", (path, response.content)
    patched = manager.patch(f"/api/v1/tenants/{team.slug}/", {"description": "x"}, format="json")
    assert patched.status_code == 409
    assert AuditEvent.objects.count() == events

    # Pickers: the page forms and the tenant switcher offer only live tenants.
    assert f'value="{team.pk}"' not in page.get("/tenants/new/").content.decode()
    assert f'value="{team.slug}"' not in page.get("/").content.decode()

    # Archiving twice is a conflict; unarchiving brings it back, writable again.
    assert admin.post(f"/api/v1/tenants/{team.slug}/archive/", {}, format="json").status_code == 409
    response = admin.post(f"/api/v1/tenants/{team.slug}/unarchive/", {}, format="json")
    assert response.status_code == 200 and response.json()["archived_at"] is None
    assert AuditEvent.objects.order_by("-id").first().action == "tenant.unarchive"
    assert team.slug in _slugs(admin)
    created = manager.post("/api/v1/queues/", {"tenant": team.slug, "name": "rt-late"}, format="json")
    assert created.status_code == 201, created.content


def test_a_tenant_with_statements_is_archived_instead_of_deleted(world, db):
    admin = api_client(world, "platform_admin")
    tenant = world.foreign.tenant

    # Refused while it has live teams, then while its own work runs: each names what to do first.
    refused = admin.post(f"/api/v1/tenants/{tenant.slug}/archive/", {}, format="json")
    assert refused.status_code == 409 and "teams" in refused.json()["message"]
    assert admin.post(f"/api/v1/tenants/{world.foreign.empty_team.slug}/archive/", {}, format="json").status_code == 200
    refused = admin.post(f"/api/v1/tenants/{tenant.slug}/archive/", {}, format="json")
    assert refused.status_code == 409 and "pending or running" in refused.json()["message"]
    Admission.objects.filter(queue__tenant=tenant).update(state="released")  # its work is over

    assert admin.post(f"/api/v1/tenants/{tenant.slug}/archive/", {}, format="json").status_code == 200
    assert admin.delete(f"/api/v1/tenants/{tenant.slug}/").status_code == 409  # its history still blocks a delete
    statements = admin.get(f"/api/v1/statements/?tenant={tenant.slug}").json()["results"]
    assert statements and statements[0]["tenant"] == tenant.slug  # kept for its statements
    # A team cannot come back while its organization is archived.
    team = world.foreign.empty_team
    refused = admin.post(f"/api/v1/tenants/{team.slug}/unarchive/", {}, format="json")
    assert refused.status_code == 409 and tenant.slug in refused.json()["message"]


def test_the_tenant_page_has_the_button_for_platform_admins_only(world, db):
    team = world.own.empty_team
    admin, manager = Client(), Client()
    admin.force_login(world.personas.platform_admin)
    manager.force_login(world.personas.tenant_admin_a)
    assert 'data-testid="archive-form"' in admin.get(f"/tenants/{team.slug}/").content.decode()
    assert 'data-testid="archive-form"' not in manager.get(f"/tenants/{team.slug}/").content.decode()

    response = admin.post(f"/tenants/{team.slug}/archive/", {"reason": "done"})
    assert response.status_code == 302
    assert Tenant.objects.get(pk=team.pk).archived_at is not None
    page = admin.get(f"/tenants/{team.slug}/").content.decode()
    assert 'data-testid="archived"' in page and 'data-testid="unarchive-tenant-open"' in page
    link = f'href="/tenants/{team.slug}/"'
    assert link not in admin.get("/tenants/").content.decode()  # hidden from the list page
    assert link in admin.get("/tenants/?archived=true").content.decode()

    manager.post(f"/tenants/{team.slug}/archive/")  # refused: not a platform admin
    assert Tenant.objects.get(pk=team.pk).archived_at is not None
    admin.post(f"/tenants/{team.slug}/archive/")  # the same button unarchives
    assert Tenant.objects.get(pk=team.pk).archived_at is None
