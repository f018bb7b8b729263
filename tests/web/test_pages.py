"""Every page of the web shell renders for every persona, and shows only what the persona may see."""

import pytest
from django.urls import reverse

from apps.accounts.models import ApiToken, Membership
from apps.audit.models import AuditEvent
from apps.operations.models import Operation
from tests.utils.personas import fresh

PERSONAS = ["platform_admin", "tenant_admin_a", "member_a", "member_b", "oncall", "viewer_a"]


def pages(personas):
    """(url, visible only to those who may view tenant A)."""
    event = AuditEvent.objects.filter(tenant=personas.a).first()
    op = Operation.objects.create(kind="test.count", tenant=personas.a, actor=personas.member_a)
    return [
        (reverse("dashboard:home"), False),
        (reverse("tenancy:tenant_list"), False),
        (reverse("tenancy:tenant_create"), False),
        (reverse("accounts:profile"), False),
        (reverse("accounts:memberships"), False),
        (reverse("accounts:tokens"), False),
        (reverse("audit:event_list"), False),
        (reverse("operations:operation_list"), False),
        (reverse("workloads:workload_list"), False),
        (reverse("workloads:template_list"), False),
        (reverse("health:incident_list"), False),
        (reverse("chargeback:statement_list"), False),
        (reverse("tenancy:tenant_detail", args=["a"]), True),
        (reverse("audit:event_detail", args=[event.pk]), True),
        (reverse("operations:operation_detail", args=[op.pk]), True),
    ]


@pytest.mark.parametrize("persona", PERSONAS)
def test_every_page_renders(personas, client, persona, django_assert_max_num_queries):
    client.force_login(personas.user(persona))
    sees_a = persona != "member_b"
    for url, needs_a in pages(personas):
        with django_assert_max_num_queries(25):
            response = client.get(url)
        expected = 404 if needs_a and not sees_a else 200
        assert response.status_code == expected, (persona, url, response.status_code)


def test_anonymous_is_sent_to_login(db, client):
    response = client.get(reverse("audit:event_list"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_cross_tenant_pages_are_404(personas, client):
    client.force_login(personas.member_b)
    assert client.get(reverse("tenancy:tenant_detail", args=["a"])).status_code == 404
    event = AuditEvent.objects.filter(tenant=personas.a).first()
    assert client.get(reverse("audit:event_detail", args=[event.pk])).status_code == 404
    body = client.get(reverse("audit:event_list") + "?page_size=500").content.decode()
    assert "Org A" not in body


def test_tenant_switcher_narrows_lists(personas, client):
    client.force_login(personas.platform_admin)
    response = client.post(reverse("accounts:switch_tenant"), {"tenant": "b", "next": reverse("audit:event_list")})
    assert response.status_code == 302 and response["Location"] == reverse("audit:event_list")
    page = client.get(reverse("audit:event_list"))
    assert "Showing tenant Org B only" in page.content.decode()
    assert {e.tenant_id for e in page.context["object_list"]} == {personas.b.pk}
    # An unsafe redirect target falls back home; a tenant you cannot view is 404.
    assert client.post(reverse("accounts:switch_tenant"), {"tenant": "", "next": "https://evil.example/"})[
        "Location"
    ] == reverse("dashboard:home")
    client.force_login(personas.member_b)
    assert client.post(reverse("accounts:switch_tenant"), {"tenant": "a"}).status_code == 404


def test_token_page_shows_raw_token_once(personas, client):
    client.force_login(personas.member_a)
    response = client.post(
        reverse("accounts:tokens"), {"name": "laptop", "tenant": personas.a.pk, "role": "member"}, follow=True
    )
    assert response.redirect_chain == [(reverse("accounts:tokens"), 302)]  # a reload cannot re-submit the form
    raw = response.context["new_token"]
    assert raw and raw.startswith("gpuc_") and raw in response.content.decode()
    assert raw not in client.get(reverse("accounts:tokens")).content.decode()
    assert ApiToken.objects.filter(name="laptop").count() == 1


def test_token_form_error_for_a_role_the_user_lacks(personas, client):
    client.force_login(personas.member_a)
    response = client.post(reverse("accounts:tokens"), {"name": "x", "tenant": personas.a.pk, "role": "tenant-admin"})
    assert response.status_code == 200 and response.context["new_token"] is None
    assert "cannot exceed" in response.content.decode()


def test_membership_page_errors_are_shown(personas, client):
    client.force_login(personas.tenant_admin_a)
    # member-a already has a role on A: the service refuses and the form says why.
    response = client.post(
        reverse("accounts:memberships"), {"user": "member-a", "tenant": personas.a.pk, "role": "viewer"}
    )
    assert response.status_code == 200
    assert "already has a role there" in response.content.decode()
    assert Membership.objects.get(user=personas.member_a, tenant=personas.a).role == "member"


def test_operation_detail_polls_while_running(personas, client):
    op = Operation.objects.create(kind="test.count", tenant=personas.a, progress=40, status="running")
    client.force_login(fresh(personas.member_a))
    body = client.get(reverse("operations:operation_detail", args=[op.pk])).content.decode()
    assert 'hx-trigger="every 2s"' in body and "40%" in body
    partial = client.get(reverse("operations:operation_detail", args=[op.pk]), HTTP_HX_REQUEST="true")
    assert "<html" not in partial.content.decode() and 'id="operation-status"' in partial.content.decode()
    Operation.objects.filter(pk=op.pk).update(status="succeeded", progress=100)
    body = client.get(reverse("operations:operation_detail", args=[op.pk])).content.decode()
    assert "hx-trigger" not in body


def test_filtering_keeps_the_switcher_tenant(personas, client):
    """The filter form always submits an empty `tenant=`; that must not widen the list beyond the switcher."""
    client.force_login(personas.platform_admin)
    client.post(reverse("accounts:switch_tenant"), {"tenant": "b"})
    page = client.get(reverse("audit:event_list") + "?tenant=&action=membership")
    assert {e.tenant_id for e in page.context["object_list"]} == {personas.b.pk}
    page = client.get(reverse("audit:event_list") + "?tenant=a")  # an explicit filter wins
    assert {e.tenant_id for e in page.context["object_list"]} == {personas.a.pk}
    assert "Showing tenant" not in page.content.decode()
