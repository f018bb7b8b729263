"""Every error on an API path is the one JSON shape, also those Django answers itself (issue 20: they were HTML).

And a JSON body nested too deep is a 400, where it was a RecursionError (a 500) for any logged-in user.
"""

from __future__ import annotations

import pytest
from django.test import Client

from apps.audit.models import AuditEvent
from apps.core.jsondepth import json_depth
from tests.utils.personas import fresh

SHAPE = {"message", "code", "fields", "request_id"}


def _json_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) >= SHAPE and body["code"] == code, body
    assert body["request_id"] == response["X-Request-ID"]
    return body


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/no-such-thing/",  # no route at all
        "/api/v1/nodes/0.95/",  # a lookup the router's pattern does not match
        "/api/v1/workloads/x.y/cancel/",
        "/api/v1/tiers/a.b/",
        "/api/v1/tenants/a/no-such-action/",
    ],
)
def test_unrouted_api_paths_are_json_404(personas, api, path):
    for client in (api(fresh(personas.platform_admin)), api()):
        _json_error(client.get(path), 404, "not_found")
        _json_error(client.post(path, {}, format="json"), 404, "not_found")


def test_pages_keep_their_html_404(personas):
    client = Client()
    client.force_login(fresh(personas.platform_admin))
    response = client.get("/no-such-page/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


def test_an_exception_that_escapes_a_view_is_a_json_500(personas, api, monkeypatch):
    from apps.tenancy.api.views import TenantViewSet

    def explode(self, request, *args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(TenantViewSet, "list", explode)
    client = api(fresh(personas.platform_admin))
    client.raise_request_exception = False
    body = _json_error(client.get("/api/v1/tenants/"), 500, "server_error")
    assert "boom" not in body["message"]  # no internals in the answer; the log has them


def test_a_request_django_refuses_is_a_json_400(personas, api):
    """A Host not in ALLOWED_HOSTS: Django refuses it (SuspiciousOperation) before any view."""
    client = api(fresh(personas.platform_admin))
    _json_error(client.get("/api/v1/tenants/", HTTP_HOST="evil.example"), 400, "bad_request")
    assert Client().get("/", HTTP_HOST="evil.example")["Content-Type"].startswith("text/html")


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [33, 1000, 100_000])
def test_json_nested_too_deep_is_a_400(personas, api, depth):
    events = AuditEvent.objects.count()
    for persona in (personas.member_a, personas.platform_admin):
        response = api(fresh(persona)).generic(
            "POST", "/api/v1/workloads/", f'{{"kind": "training", "spec": {_nested(depth)}}}', "application/json"
        )
        body = _json_error(response, 400, "parse_error")
        assert "nested deeper than 32 levels" in body["message"]
    assert AuditEvent.objects.count() == events


def test_json_as_deep_as_allowed_reaches_validation(personas, api):
    """31 levels inside the body's own object: parsed, and refused by the serializer for what it is."""
    response = api(fresh(personas.platform_admin)).generic(
        "POST", "/api/v1/tenants/", f'{{"name": "x", "slug": "ok", "description": {_nested(31)}}}', "application/json"
    )
    _json_error(response, 400, "invalid")


def test_json_depth_is_counted_without_recursion():
    assert json_depth(1) == 0 and json_depth({}) == 1 and json_depth({"a": [1, {"b": []}]}) == 4
    deep: list = []
    for _ in range(50_000):
        deep = [deep]
    assert json_depth(deep) == 50_001


def test_pages_json_fields_refuse_deep_json_too(personas):
    client = Client()
    client.force_login(fresh(personas.member_a))
    response = client.post("/workloads/new/", {"kind": "training", "spec": _nested(5000)})
    assert response.status_code == 400  # the form again, with the error at the spec box
    assert "nested deeper than 32 levels" in response.content.decode()


def test_a_protected_error_no_service_caught_is_a_409_naming_the_rows(personas, api, monkeypatch):
    """The exception handler's fallback: any delete Django refuses for referencing rows is a 409, never a 500."""
    from django.db.models import ProtectedError

    from apps.accounts.models import Membership
    from apps.tenancy.api.views import TenantViewSet

    def refuse(self, request, *args, **kwargs):
        raise ProtectedError("protected", set(Membership.objects.filter(tenant=personas.a)))

    monkeypatch.setattr(TenantViewSet, "destroy", refuse)
    body = _json_error(api(fresh(personas.platform_admin)).delete("/api/v1/tenants/a/"), 409, "protected")
    assert "memberships still refer to it" in body["message"], body


def test_a_body_over_the_upload_limit_is_a_400(personas, api, settings):
    """DRF reads the stream itself: DATA_UPLOAD_MAX_MEMORY_SIZE did not bound API bodies until the parser did."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 200
    client = api(fresh(personas.platform_admin))
    body = _json_error(
        client.post("/api/v1/tenants/", {"name": "x", "slug": "big", "description": "d" * 300}, format="json"),
        400,
        "parse_error",
    )
    assert "larger than 200 bytes" in body["message"]
    assert client.post("/api/v1/tenants/", {"name": "x", "slug": "small"}, format="json").status_code == 201
