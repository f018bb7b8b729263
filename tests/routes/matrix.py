"""The machinery of the route matrix: what the URL conf and the OpenAPI schema offer, a declared spec per route,
the request for one (route, persona, target), and the checks on its answer.

Routes come from the URL resolver and operations from the schema drf-spectacular generates, never from a list
kept by hand, so a new route is a new test case; the tables (table_pages.py, table_api.py) say what each should
answer, and a route missing from them fails with "add it to the table".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from http.cookies import SimpleCookie

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.test import APIClient

from apps.audit.models import AuditEvent
from tests.routes.policy import DENIED, FORBIDDEN, HIDDEN, OK, SEES_ONLY_A, SEES_ONLY_B, Rule
from tests.routes.world import A_MARKERS, B_MARKERS, Side, World

OWN, FOREIGN, SHARED = "own", "foreign", "shared"
PUBLIC_PERSONAS = ["anonymous", "member_a"]
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass(frozen=True)
class Spec:
    """What one route (or one variant of it) answers, declared from the permission model.

    `obj(world, side)`: the path's arguments for a tenant's object, run for A's and for B's (for a fleet object:
    the one running A's work and the one running B's); or `shared(world)` for a shared object (fleet, billing,
    policy), run once. `body(world, side)` builds a valid request body, so that a refusal is the permission's and
    not the input's. `tenant(side)`: the tenant the rule is evaluated on (by default the side's tenant).
    `in_body`: the object is named in the body, not the path, and a refusal may be 403 or 404. `ok`: the
    statuses of success. `changes`: for a write, whether success changes state (True: it must, with exactly one
    audit event; False: it never does; None: not checked). `tenant_view`: False for an endpoint that is no
    tenant's view at all (a scraper's), where the leak check does not apply. `known`: (persona, target) -> why
    this pair is a known bug today: it is marked xfail(strict=True) and flips when fixed.
    """

    rule: Rule
    method: str = "GET"
    obj: Callable[[World, Side], dict] | None = None
    shared: Callable[[World], dict] | None = None
    body: Callable[[World, Side | None], dict] | None = None
    query: str | Callable[[World, Side | None], str] = ""
    tenant: Callable[[Side], str] | None = None
    in_body: bool = False
    ok: tuple[int, ...] = (200,)
    changes: bool | None = True
    tenant_view: bool = True
    known: dict[tuple[str, str], str] = field(default_factory=dict)

    def targets(self) -> list[str]:
        if self.obj is not None:
            return [OWN, FOREIGN]
        return [SHARED]

    def tenant_of(self, side: Side | None) -> str | None:
        if side is None:
            return None
        return self.tenant(side) if self.tenant else side.tenant.slug

    def expected(self, persona: str, side: Side | None) -> str:
        outcome = self.rule.outcome(persona, self.tenant_of(side))
        if self.in_body and outcome in (HIDDEN, FORBIDDEN):
            return DENIED
        return outcome

    def path_args(self, world: World, side: Side | None) -> dict:
        if self.obj is not None:
            return self.obj(world, side)
        if self.shared is not None:
            return self.shared(world)
        return {}

    def query_string(self, world: World, side: Side | None) -> str:
        query = self.query(world, side) if callable(self.query) else self.query
        return f"?{query}" if query else ""


def fill(route: str, args: dict) -> str:
    """A concrete path for a route pattern: `<int:pk>` and `{pk}` and `(?P<pk>…)` replaced from `args`."""

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in args:
            raise KeyError(f"{route}: the table gives no value for {name!r}")
        return str(args[name])

    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", value, route)
    path = re.sub(r"<(?:\w+:)?(\w+)>", value, path)
    path = re.sub(r"\{(\w+)\}", value, path)
    path = path.replace("^", "").replace("$", "").replace("\\", "")
    return path if path.startswith("/") else "/" + path


def entries(table: dict[str, Spec], key: str, pattern: str = "", prefixes: dict[str, Spec] | None = None) -> list[str]:
    """The table keys that describe a route: its key (URL name) or its pattern (for a route whose name may change
    while its URL stays), each with its variants (`key#variant`); else a prefix rule covering a whole family."""
    names = {key, pattern} - {""}
    found = [k for k in table if k.split("#")[0] in names]
    if not found and prefixes:
        found = [prefix for prefix in prefixes if key.startswith(prefix)][:1]
    return found


def cases(table: dict[str, Spec], routes: dict[str, str], personas: list[str], prefixes=None) -> list:
    """pytest params (route key, table entry, persona, target) for every route offered (key -> pattern), known
    bugs marked xfail(strict). A route without an entry still gets a case: it fails, saying to add it."""
    params = []
    for key, pattern in routes.items():
        found = entries(table, key, pattern, prefixes)
        if not found:
            params.append(pytest.param(key, None, "-", SHARED, id=f"{key}|missing"))
            continue
        for entry in found:
            spec = table.get(entry) or prefixes[entry]
            # A public route answers everyone alike: checked without a login and as one tenant's member.
            for persona in PUBLIC_PERSONAS if spec.rule.public else personas:
                for target in spec.targets():
                    marks = []
                    reason = spec.known.get((persona, target))
                    if reason:
                        marks.append(pytest.mark.xfail(strict=True, reason=reason))
                    label = entry if entry in table else key
                    params.append(
                        pytest.param(key, entry, persona, target, marks=marks, id=f"{label}|{persona}|{target}")
                    )
    return params


def missing(key: str, hint: str):
    pytest.fail(
        f"{key} has no entry in the route table ({hint}): add it to the table, with who may call it "
        "(docs/permissions.md, docs/api.md) and an object of A and of B if it needs one."
    )


#
# Leaks: another tenant's rows in an answer
#


def leaked(persona: str, text: str, sent: str = "") -> list[str]:
    """The other tenant's names that appear in `text` (A's personas must not see B's, B's member not A's).
    What the request itself `sent` may come back (a form shown again with its input) and is not a leak."""
    markers = B_MARKERS if persona in SEES_ONLY_A else A_MARKERS if persona in SEES_ONLY_B else ()
    return [marker for marker in markers if marker in text and marker not in sent]


#
# State: a fingerprint of every table, to prove that a refused request changed nothing
#

# Bookkeeping that changes on any authenticated request and is not state a refusal could alter.
_VOLATILE = {
    ("django_session", None),
    ("accounts_apitoken", "last_used_at"),
    ("accounts_user", "last_login"),
}


@cache
def _fingerprint_sql() -> str:
    parts = []
    with connection.cursor() as cursor:
        tables = sorted(connection.introspection.table_names(cursor))
        for table in tables:
            if (table, None) in _VOLATILE or table == "django_migrations":
                continue
            columns = [
                c.name
                for c in connection.introspection.get_table_description(cursor, table)
                if (table, c.name) not in _VOLATILE
            ]
            row = "ROW(" + ", ".join(connection.ops.quote_name(c) for c in columns) + ")::text"
            parts.append(
                f"SELECT '{table}', count(*), md5(coalesce(string_agg(md5({row}), ',' ORDER BY md5({row})), '')) "
                f"FROM {connection.ops.quote_name(table)} AS t"
            )
    return " UNION ALL ".join(parts)


def fingerprint() -> dict[str, tuple[int, str]]:
    with connection.cursor() as cursor:
        cursor.execute(_fingerprint_sql())
        return {table: (count, digest) for table, count, digest in cursor.fetchall()}


def changed_tables(before: dict, after: dict) -> list[str]:
    return sorted(table for table in after if before.get(table) != after[table])


def check_effects(world, spec, expected: str, events: int, where: str) -> None:
    """After a write: a refused (or read-only) call changed no table and wrote no audit event; an allowed one
    changed something and wrote exactly one audit event (docs/api.md; pages call the same services)."""

    changed = changed_tables(world.fingerprint, fingerprint())
    if expected != OK or spec.changes is False:
        assert not changed, f"{where}\nrefused (or read-only), yet it changed {changed}"
        assert AuditEvent.objects.count() == events, where
    elif spec.changes:
        assert changed, f"{where}\nallowed, yet nothing changed"
        written = AuditEvent.objects.count() - events
        assert written == 1, f"{where}\n{written} audit events"


def check_no_leak(persona: str, text: str, sent: str, where: str) -> None:
    """Nothing of the other tenant's rows in the answer (text the request itself sent is exempt)."""
    leaks = leaked(persona, text, sent=sent)
    assert not leaks, f"{where}\nshows another tenant's {leaks}"


def body_text(response) -> str:
    """The answer's body as text, a streamed one (a workload's log) read to its end once and kept."""
    if getattr(response, "streaming", False):
        if not hasattr(response, "_matrix_text"):
            response._matrix_text = b"".join(response.streaming_content).decode(errors="replace")
        return response._matrix_text
    return response.content.decode(errors="replace") if hasattr(response, "content") else ""


def describe(response) -> str:
    return f"{response.status_code} {response.get('Location', '')} {body_text(response)[:600]}"


#
# What the project offers: every resolver route, every operation of the OpenAPI schema
#


def _walk(patterns, prefix: str = "", namespace: str | None = None):
    from django.urls import URLResolver

    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = namespace
            if pattern.namespace:
                inner = f"{namespace}:{pattern.namespace}" if namespace else pattern.namespace
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern), inner)
        else:
            yield namespace, pattern.name, prefix + str(pattern.pattern), pattern.callback


@cache
def _schema_generator(urlconf: str | None = None):
    from drf_spectacular.generators import SchemaGenerator

    generator = SchemaGenerator(urlconf=urlconf)
    generator._initialise_endpoints()
    return generator


@cache
def openapi_schema(urlconf: str | None = None) -> dict:
    """The OpenAPI schema drf-spectacular generates, as the API serves it at /api/v1/schema/ (of `urlconf`: the
    project's by default)."""
    from drf_spectacular.drainage import GENERATOR_STATS

    # Generated at collection, where the database is out of reach: a view that reads it to type a path
    # argument only warns. Keep those warnings out of the run (and out of `spectacular --fail-on-warn`).
    with GENERATOR_STATS.silence():
        schema = _schema_generator(urlconf).get_schema(request=None, public=True)
    GENERATOR_STATS.reset()
    return schema


@cache
def schema_operations(urlconf: str | None = None) -> dict[str, tuple[str, str]]:
    """'METHOD /path/{arg}/' -> (method, path) for every operation of the generated OpenAPI schema."""
    return {
        f"{method.upper()} {path}": (method.upper(), path)
        for path, operations in openapi_schema(urlconf)["paths"].items()
        for method in operations
        if method in {"get", "post", "put", "patch", "delete"}
    }


@cache
def page_routes(urlconf: str | None = None) -> dict[str, str]:
    """Every resolver route that is not an operation of the schema: key (URL name, or the pattern for an
    unnamed one) -> route pattern. Format-suffix twins of API routes share their view and are left out."""
    from django.urls import get_resolver

    operations = schema_operations(urlconf)
    api_views = {
        callback
        for path, _regex, method, callback in _schema_generator(urlconf).endpoints
        # The schema names a primary key `{id}` where the route says `{pk}` (SCHEMA_COERCE_PATH_PK).
        if f"{method.upper()} {path.replace('{pk}', '{id}')}" in operations
    }
    routes = {}
    for namespace, name, route, callback in _walk(get_resolver(urlconf).url_patterns):
        if callback in api_views:
            continue
        key = f"{namespace}:{name}" if namespace and name else name or route
        routes.setdefault(key, route)
    return routes


#
# Clients
#

_CLIENTS: dict[str, APIClient] = {}


def api_client(world, persona: str) -> APIClient:
    """One client per persona for the whole run (a new one loads every middleware again), presenting the
    persona's session cookie, or for token_a its bearer token and nothing else."""
    client = _CLIENTS.get(persona)
    if client is None:
        client = _CLIENTS[persona] = APIClient()
        if persona == "token_a":
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.personas.token_a_raw}")
    client.cookies = SimpleCookie()
    if persona in world.sessions:
        client.cookies[settings.SESSION_COOKIE_NAME] = world.sessions[persona]
    return client
