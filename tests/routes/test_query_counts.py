"""Query-count baselines: every page and every API list, as a platform admin, in the fixed world of this package.

The counts are committed in tests/baselines/queries.json. A count that grows fails (an N+1 crept in, or a
page reads something new: look at the queries listed in the failure); a count that shrinks passes.

To write the file again after an intended change (or for a new route), run

    UPDATE_QUERY_BASELINES=1 pytest tests/routes/test_query_counts.py

and commit tests/baselines/queries.json with the change that explains it. Every request is made twice and the
second one counted, so what a first request caches in the process does not decide the count.
"""

from __future__ import annotations

import json
import os
from http.cookies import SimpleCookie
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.routes.matrix import OWN, fill, page_routes, schema_operations
from tests.routes.policy import OK
from tests.routes.table_api import TABLE as API_TABLE
from tests.routes.table_pages import TABLE as PAGE_TABLE

BASELINES = Path(__file__).resolve().parents[1] / "baselines" / "queries.json"
UPDATE = os.environ.get("UPDATE_QUERY_BASELINES") == "1"
PERSONA = "platform_admin"


def _route_of(entry: str) -> str | None:
    """The pattern of a page table entry (keyed by URL name or by pattern), None if the URL conf lacks it."""
    routes = page_routes()
    base = entry.split("#")[0]
    if base in routes:
        return routes[base]
    return base if base in routes.values() else None


def _pages() -> list[str]:
    return sorted(
        key
        for key, spec in PAGE_TABLE.items()
        if spec.method == "GET"
        and 200 in spec.ok
        and _route_of(key) is not None
        and spec.rule.outcome(PERSONA, None) == OK
    )


def _lists() -> list[str]:
    operations = schema_operations()
    return sorted(key for key in API_TABLE if key in operations and key.startswith("GET ") and "{" not in key)


KEYS = [f"page {key}" for key in _pages()] + [f"api {key}" for key in _lists()]
_measured: dict[str, int] = {}


@pytest.fixture(scope="module")
def baselines():
    recorded = json.loads(BASELINES.read_text()) if BASELINES.exists() else {}
    yield recorded
    if UPDATE and _measured:
        merged = {key: count for key, count in {**recorded, **_measured}.items() if key in KEYS}
        BASELINES.parent.mkdir(exist_ok=True)
        BASELINES.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")


@pytest.fixture(scope="module")
def admin_client(world) -> APIClient:
    client = APIClient()
    client.cookies = SimpleCookie()
    client.cookies[settings.SESSION_COOKIE_NAME] = world.sessions[PERSONA]
    return client


def _path(world, key: str) -> str:
    kind, _, entry = key.partition(" ")
    if kind == "page":
        spec = PAGE_TABLE[entry]
        route = _route_of(entry)
    else:
        spec = API_TABLE[entry]
        route = schema_operations()[entry][1]
    side = world.side(OWN) if spec.obj is not None else None
    return fill(route, spec.path_args(world, side)) + spec.query_string(world, side)


@pytest.mark.parametrize("key", KEYS)
def test_query_count(world, db, baselines, admin_client, key):
    path = _path(world, key)
    admin_client.get(path)  # first: whatever it caches in the process
    with CaptureQueriesContext(connection) as queries:
        response = admin_client.get(path)
    assert response.status_code in (200, 302), f"{path}: {response.status_code}"
    count = len(queries.captured_queries)
    _measured[key] = count
    if UPDATE:
        return
    assert key in baselines, f"{key} has no baseline: run UPDATE_QUERY_BASELINES=1 pytest {__file__}"
    listing = "\n".join(f"  {q['sql'][:300]}" for q in queries.captured_queries)
    assert count <= baselines[key], (
        f"{path}: {count} queries, the baseline is {baselines[key]}. An N+1? If the change is intended, run "
        f"UPDATE_QUERY_BASELINES=1 pytest {__file__} and commit the file.\n{listing}"
    )


def test_baselines_name_existing_routes():
    recorded = json.loads(BASELINES.read_text()) if BASELINES.exists() else {}
    stale = sorted(set(recorded) - set(KEYS))
    assert not stale, f"baselines of routes that are gone: {stale}; run UPDATE_QUERY_BASELINES=1 to drop them"
