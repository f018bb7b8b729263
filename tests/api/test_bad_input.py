"""Bad input gets 400 with field errors in one JSON shape, and changes nothing."""

import pytest

from apps.accounts.models import Tenant
from apps.audit.models import AuditEvent
from tests.utils.personas import fresh


@pytest.fixture
def admin_client(personas, api):
    return api(fresh(personas.platform_admin))


def _assert_400_nothing_changed(response, field: str):
    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body) == {"message", "code", "fields", "request_id"}
    assert body["code"] in {"invalid", "parse_error"}
    if field:
        assert field in body["fields"], body
        assert all(isinstance(m, str) and m for m in body["fields"][field])
    assert body["request_id"] == response["X-Request-ID"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"name": "x", "slug": "x", "colour": "red"}, "colour"),  # unknown field
        ({"name": "x", "slug": "Not_DNS"}, "slug"),  # not a DNS-1123 label
        ({"name": "x", "slug": "a" * 64}, "slug"),  # over-long slug
        ({"name": "n" * 101, "slug": "ok"}, "name"),  # over-long name
        ({"name": ["list"], "slug": "ok"}, "name"),  # wrong type
        ({"slug": "ok"}, "name"),  # missing required field
        ({"name": "x", "slug": "a"}, "slug"),  # already taken
    ],
)
def test_tenant_create_bad_input(personas, admin_client, payload, field):
    events, tenants = AuditEvent.objects.count(), Tenant.objects.count()
    response = admin_client.post("/api/v1/tenants/", payload, format="json")
    _assert_400_nothing_changed(response, field)
    assert (AuditEvent.objects.count(), Tenant.objects.count()) == (events, tenants)


def test_malformed_json_is_400(personas, admin_client):
    events = AuditEvent.objects.count()
    response = admin_client.generic(
        "POST", "/api/v1/tenants/", '{"name": "x", "slug": ', content_type="application/json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "parse_error" and "JSON parse error" in body["message"]
    assert AuditEvent.objects.count() == events


def test_non_object_body_is_400(personas, admin_client):
    response = admin_client.post("/api/v1/tenants/", ["a", "list"], format="json")
    _assert_400_nothing_changed(response, "non_field_errors")


def test_wrong_content_type_is_415(personas, admin_client):
    response = admin_client.generic(
        "POST", "/api/v1/tenants/", "name=x", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415
    assert "message" in response.json()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"name": "t", "tenant": "a", "role": "superuser"}, "role"),
        ({"name": "t", "tenant": "a", "role": "member", "expires_in_days": 0}, "expires_in_days"),
        ({"name": "t", "tenant": "a", "role": "member", "expires_in_days": "soon"}, "expires_in_days"),
        ({"name": "", "tenant": "a", "role": "member"}, "name"),
        ({"name": "t" * 101, "tenant": "a", "role": "member"}, "name"),
        ({"name": "t", "tenant": "a", "role": "member", "digest": "0" * 64}, "digest"),
        ({"name": "t", "role": "member"}, "tenant"),
    ],
)
def test_token_create_bad_input(personas, api, payload, field):
    from apps.accounts.models import ApiToken

    tokens, events = ApiToken.objects.count(), AuditEvent.objects.count()
    response = api(fresh(personas.tenant_admin_a)).post("/api/v1/tokens/", payload, format="json")
    _assert_400_nothing_changed(response, field)
    assert (ApiToken.objects.count(), AuditEvent.objects.count()) == (tokens, events)


def test_membership_bad_input(personas, admin_client):
    events = AuditEvent.objects.count()
    _assert_400_nothing_changed(
        admin_client.post("/api/v1/memberships/", {"user": "ghost", "tenant": "a", "role": "member"}, format="json"),
        "user",
    )
    _assert_400_nothing_changed(
        admin_client.post("/api/v1/memberships/", {"user": "member-b", "tenant": "a", "role": "boss"}, format="json"),
        "role",
    )
    assert AuditEvent.objects.count() == events


def test_bad_page_and_filter_values(personas, admin_client):
    assert admin_client.get("/api/v1/tenants/?page=999").status_code == 404
    assert admin_client.get("/api/v1/memberships/?role=boss").status_code == 400
    assert admin_client.get("/api/v1/tenants/?page_size=5000").json()["count"] == 3  # capped, not an error
