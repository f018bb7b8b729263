"""Every page route of the URL conf, for every persona, on A's object and B's: the answer the permission model
says, no other tenant's names in it, and nothing changed by a refused form.

The routes come from Django's URL resolver (everything that is not an operation of the API schema), so a new
page is a new case here; what it should answer comes from tests/routes/table_pages.py, and a page missing there
fails with "add it to the table". An API token is not a browser login: with one, every page that needs a login
sends to the login page. Known bugs are xfail(strict=True) pairs in the table and flip when fixed.
"""

from __future__ import annotations

from http.cookies import SimpleCookie

import pytest
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db.models import Min
from django.test import Client
from django.urls import reverse

from apps.audit.models import AuditEvent
from tests.routes.matrix import (
    FOREIGN,
    OWN,
    WRITE_METHODS,
    cases,
    check_effects,
    check_no_leak,
    describe,
    fill,
    missing,
    page_routes,
)
from tests.routes.policy import DENIED, FORBIDDEN, HIDDEN, LOGIN, OK, PAGE_PERSONAS
from tests.routes.table_pages import PREFIXES, TABLE, admin_ok

PERSONAS = [*PAGE_PERSONAS, "token_a"]


def _admin_args(world, pattern: str) -> tuple[dict, bool]:
    """Arguments of an admin route: the app and model come from its path; an object is the model's first row."""
    from django.apps import apps

    if pattern.startswith("admin/r/"):  # "view on site" of a tenant, whichever app the model lives in
        tenant = world.personas.a
        return {"content_type_id": ContentType.objects.get_for_model(tenant).pk, "object_id": tenant.pk}, True
    args = {"url": "nowhere/", "app_label": "accounts"}
    if "object_id" not in pattern and "<id>" not in pattern:
        return args, True
    app_label, model_name = pattern.split("/")[1:3]
    first = apps.get_model(app_label, model_name).objects.aggregate(pk=Min("pk"))["pk"]
    return {**args, "object_id": first or 0, "id": first or 0}, first is not None


_CLIENTS: dict[str, Client] = {}


def _client(world, persona: str) -> Client:
    """One client per persona for the whole run (a new one loads every middleware again, WhiteNoise's scan of the
    static files included: most of a request's cost), with nothing but the persona's session cookie."""
    client = _CLIENTS.get(persona)
    if client is None:
        client = _CLIENTS[persona] = Client()
        if persona == "token_a":  # a bearer token is for the API; a page must not take it as a login
            client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {world.personas.token_a_raw}"
    client.cookies = SimpleCookie()
    if persona in world.sessions:
        client.cookies[settings.SESSION_COOKIE_NAME] = world.sessions[persona]
    return client


def _text(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


def _to_login(response, route: str) -> bool:
    login = reverse("admin:login") if route.startswith("admin") else reverse(settings.LOGIN_URL)
    return response.status_code == 302 and response["Location"].startswith(login)


@pytest.mark.parametrize(("route", "entry", "persona", "target"), cases(TABLE, page_routes(), PERSONAS, PREFIXES))
def test_page(world, db, route, entry, persona, target):
    if entry is None:
        missing(route, "tests/routes/table_pages.py")
    spec = TABLE.get(entry) or PREFIXES[entry]
    pattern = page_routes()[route]
    ok, args = spec.ok, None
    if entry in PREFIXES:
        args, has_row = _admin_args(world, pattern)
        ok = admin_ok(pattern, has_row)
    check_page(world, spec, route, pattern, persona, target, ok=ok, args=args, admin=entry in PREFIXES)


def check_page(world, spec, route: str, pattern: str, persona: str, target: str, *, ok, args=None, admin=False):
    """Ask for page `route` (`pattern`) as `spec` says, as `persona`, on `target`'s object; fail unless it answers as
    the permission model says, shows nothing of the other tenant's, and (refused) changed nothing."""
    side = world.side(target) if target in (OWN, FOREIGN) else None
    if args is None:
        args = spec.path_args(world, side)
    path = fill(pattern, args) + spec.query_string(world, side)
    as_whom = "anonymous" if persona == "token_a" and not route.startswith("api:") else persona
    expected = spec.expected(as_whom, side)
    client = _client(world, persona)
    writes = spec.method in WRITE_METHODS
    events = AuditEvent.objects.count() if writes else 0

    body = spec.body(world, side) if spec.body else {}
    response = client.get(path) if spec.method == "GET" else client.post(path, body)
    where = f"{spec.method} {path} as {persona}: expected {expected}, got {describe(response)}"

    if expected == OK:
        assert response.status_code in ok, where
        if response.status_code == 302 and not spec.rule.public:
            assert not _to_login(response, route), where
    elif expected == LOGIN:
        if route.startswith("api:"):
            assert response.status_code == 401, where
        else:
            assert _to_login(response, route), where
    elif expected == HIDDEN:
        assert response.status_code == 404, where
    elif admin:  # the admin sends everyone else to its own login page
        assert _to_login(response, route), where
    elif spec.method == "GET":
        assert response.status_code == 403, where
    else:  # a refused form: 403/404, or the page again (or a redirect) saying why; below: nothing changed
        assert expected in (FORBIDDEN, DENIED)
        assert response.status_code in (200, 302, 403, 404) and not _to_login(response, route), where

    if writes:
        check_effects(world, spec, expected, events, where)

    if spec.tenant_view:
        check_no_leak(persona, _text(response), f"{path} {body}", where)


def test_every_table_entry_names_a_route():
    """An entry whose route is gone is a stale promise: remove it (or fix its name)."""
    routes = page_routes()
    known = set(routes) | set(routes.values())  # URL names and patterns
    stale = [key for key in TABLE if key.split("#")[0] not in known]
    assert not stale, f"table_pages.py names routes the URL conf does not have: {stale}"
