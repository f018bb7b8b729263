"""The server does what its OpenAPI schema says: schemathesis over every operation of /api/v1/schema/ (issue 20).

Requests generated from the schema go to the console's WSGI application, in this process, as a platform admin
with a bearer token, against the route matrix's world (tests/routes/world.py: both tenants' rows of every kind,
a simulated fleet, a closed period). Half of the generated path arguments are rows that exist (read from the
API's own lists first), so that the answers are the rows', not only 404s. Each generated request runs in a
savepoint rolled back after it: every request sees the same world.

Checks: no 5xx (`not_a_server_error`), every answer's status and content type declared for its operation,
and its body valid against the declared schema. Bounded: `MAX_EXAMPLES` generated requests per operation and
the schema's own examples and boundary cases (the coverage phase), with a fixed seed so that a run is
reproducible; `SCHEMATHESIS_SEED` and `SCHEMATHESIS_MAX_EXAMPLES` change them for a longer hunt.
"""

from __future__ import annotations

import os
import re

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from apps.accounts import services as accounts
from apps.accounts.roles import Role

CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance", "response_schema_conformance")
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "12"))
CONFIG = {
    "seed": int(os.environ.get("SCHEMATHESIS_SEED", "20")),
    "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
    "phases": {"stateful": {"enabled": False}},
    "generation": {"max-examples": MAX_EXAMPLES},
}
# Operations that answered 2xx at least once, and how many requests went out: a run where every answer was
# a declared 401 or 404 would pass every check and prove nothing (the last test here says so).
ANSWERED: set[str] = set()
SENT: list[int] = [0]
LOOKUP = re.compile(r"^(/api/v1/(?:[\w-]+/)+?)\{(\w+)\}/")
# Under pytest-xdist both tests run in one process, in this order: the last one reads what the first recorded.
pytestmark = pytest.mark.xdist_group("schemathesis")


def _existing_values(client, token: str, paths: list[str]) -> dict[str, list]:
    """`/api/v1/tenants/` -> the slugs of its rows (the field its detail path takes), from each list's first page."""
    known: dict[str, list] = {}
    for path in paths:
        match = LOOKUP.match(path)
        if not match or match.group(1) in known:
            continue
        prefix, field = match.groups()
        response = client.get(prefix, headers={"Authorization": f"Bearer {token}"})
        if response.status_code != 200:
            continue
        body = response.get_json()
        rows = body.get("results", []) if isinstance(body, dict) else body
        known[prefix] = [row[field] for row in rows if isinstance(row, dict) and row.get(field) is not None][:20]
    return {prefix: values for prefix, values in known.items() if values}


@pytest.fixture
def api_schema(world, db, settings):
    from django.core.wsgi import get_wsgi_application
    from werkzeug import Client

    # Django's WSGI application itself: console.wsgi also refuses the suite's (published) SECRET_KEY at import,
    # as a deployment's web server must (tests/core/test_wsgi.py).
    application = get_wsgi_application()

    settings.ALLOWED_HOSTS = ["localhost"]  # where schemathesis' WSGI client says it is
    settings.LOGS_FOLLOW_MAX_S = 1  # a generated follow=true reads a running workload's log for a second, not an hour
    admin = world.personas.platform_admin
    _token, raw = accounts.issue_token(admin, user=admin, name="schemathesis", role=Role.PLATFORM_ADMIN)
    # Django closes the database connection at the end of a request it serves through WSGI; here that
    # connection holds the world's transaction. (Django's test client disconnects the same signal.)
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        schema = schemathesis.openapi.from_wsgi(
            "/api/v1/schema/?format=json", application, config=schemathesis.Config.from_dict(CONFIG)
        )
        known = _existing_values(Client(application), raw, list(schema.raw_schema["paths"]))

        @schema.hook
        def flatmap_path_parameters(context, path_parameters):
            match = LOOKUP.match(context.operation.path)
            values = known.get(match.group(1)) if match else None
            if not values:
                return st.just(path_parameters)
            field = match.group(2)
            return st.one_of(
                st.just(path_parameters), st.sampled_from(values).map(lambda value: {**path_parameters, field: value})
            )

        schema.raw_token = raw
        yield schema
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate], database=None
)
def test_the_api_does_what_its_schema_says(case, api_schema):
    with transaction.atomic():
        response = case.call_and_validate(headers={"Authorization": f"Bearer {api_schema.raw_token}"})
        transaction.set_rollback(True)
    SENT[0] += 1
    if 200 <= response.status_code < 300 and case.method.lower() == case.operation.method.lower():
        ANSWERED.add(f"{case.method} {case.operation.path}")  # the operation's own method, not a probe


def test_the_run_reached_real_rows():
    """Most operations answered 2xx at least once (92 of 125 at the fixed seed): the requests were
    authenticated and reached the world's rows, so the checks above had answers worth checking."""
    if not SENT[0]:
        pytest.skip("runs after test_the_api_does_what_its_schema_says, in the same session")
    assert len(ANSWERED) >= 70, f"only {len(ANSWERED)} operations answered 2xx: {sorted(ANSWERED)}"
