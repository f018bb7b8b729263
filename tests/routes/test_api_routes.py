"""Every operation of the API, for every persona (a token scoped to A among them), on A's object and B's: the
status the permission model says, no other tenant's rows in the answer, and nothing changed by a refusal.

The operations are every path × method of the OpenAPI schema drf-spectacular generates, so a new endpoint is a
new case here; what it should answer comes from tests/routes/table_api.py (docs/api.md's "who may call it"), and
an operation missing there fails with "add it to the table". Known bugs are xfail(strict=True) pairs in the
table and flip when fixed.
"""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from tests.routes.matrix import (
    FOREIGN,
    OWN,
    WRITE_METHODS,
    api_client,
    body_text,
    cases,
    check_effects,
    check_no_leak,
    describe,
    fill,
    missing,
    schema_operations,
)
from tests.routes.policy import API_PERSONAS, DENIED, FORBIDDEN, HIDDEN, LOGIN, OK
from tests.routes.table_api import TABLE

STATUSES = {HIDDEN: (404,), FORBIDDEN: (403,), DENIED: (403, 404), LOGIN: (401,)}


@pytest.mark.parametrize(
    ("operation", "entry", "persona", "target"), cases(TABLE, {key: key for key in schema_operations()}, API_PERSONAS)
)
def test_operation(world, db, operation, entry, persona, target):
    if entry is None:
        missing(operation, "tests/routes/table_api.py")
    spec = TABLE[entry]
    method, route = schema_operations()[operation]
    assert method == spec.method, f"{entry} is declared for {spec.method}"
    check_operation(world, spec, route, persona, target)


def check_operation(world, spec, route: str, persona: str, target: str) -> None:
    """Call `route` as `spec` says, as `persona`, on `target`'s object; fail unless it answers as the permission
    model says, shows nothing of the other tenant's, and (refused) changed nothing."""
    method = spec.method
    side = world.side(target) if target in (OWN, FOREIGN) else None
    path = fill(route, spec.path_args(world, side)) + spec.query_string(world, side)
    body = spec.body(world, side) if spec.body else None
    expected = spec.expected(persona, side)
    client = api_client(world, persona)
    writes = spec.method in WRITE_METHODS
    events = AuditEvent.objects.count() if writes else 0

    response = (
        client.generic(method, path, data=None)
        if body is None and method == "GET"
        else getattr(client, method.lower())(path, body, format="json")
    )
    where = f"{method} {path} as {persona}: expected {expected}, got {describe(response)}"

    assert response.status_code in (spec.ok if expected == OK else STATUSES[expected]), where

    if writes:
        check_effects(world, spec, expected, events, where)

    if spec.tenant_view:
        check_no_leak(persona, body_text(response), f"{path} {body}", where)


def test_every_table_entry_names_an_operation():
    """An entry whose operation is gone is a stale promise: remove it (or fix its path)."""
    operations = schema_operations()
    stale = [key for key in TABLE if key.split("#")[0] not in operations]
    assert not stale, f"table_api.py names operations the schema does not have: {stale}"
