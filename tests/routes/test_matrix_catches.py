"""The route matrix fails when a new endpoint skips its check (issue 20). Proved on a URL conf that adds, to the
project's routes, API operations and a page that skip theirs (tests/routes/unprotected_urls.py):

- undeclared, each new route is a case of the matrix that fails ("add it to the table"), so nothing is added
  silently;
- declared with the rule docs/permissions.md gives such a route, the matrix's own check fails on it: another
  tenant's rows in a list, 200 where 404 or 403 is due, a page without a login.

And, as a control, the same check passes where the careless view happens to answer right, so a failure above is
the missing permission's, not a broken harness.
"""

from __future__ import annotations

import pytest

from apps.accounts.roles import Action
from tests.routes.matrix import FOREIGN, OWN, SHARED, Spec, cases, page_routes, schema_operations
from tests.routes.policy import API_PERSONAS, LOGGED_IN, VIEW, view_and
from tests.routes.table_api import TABLE as API_TABLE
from tests.routes.table_pages import PREFIXES
from tests.routes.table_pages import TABLE as PAGE_TABLE
from tests.routes.test_api_routes import check_operation
from tests.routes.test_page_routes import PERSONAS as PAGE_PERSONAS
from tests.routes.test_page_routes import check_page

URLCONF = "tests.routes.unprotected_urls"

# What docs/permissions.md says of such routes: a list is view-scoped, a tenant's queue is seen with `view` (else
# 404) and changed with `manage` (else 403).
NEW_API = {
    "GET /api/v1/rt-unprotected/queues/": Spec(LOGGED_IN),
    "GET /api/v1/rt-unprotected/queues/{id}/": Spec(VIEW, obj=lambda w, s: {"id": s.queue.pk}),
    "POST /api/v1/rt-unprotected/queues/{id}/describe/": Spec(
        view_and(Action.MANAGE),
        method="POST",
        ok=(200,),
        obj=lambda w, s: {"id": s.queue.pk},
        body=lambda w, s: {"description": "changed by the matrix"},
    ),
}
NEW_PAGE = ("rt_unprotected_queue", Spec(VIEW, obj=lambda w, s: {"pk": s.queue.pk}))


def _missing(params) -> set[str]:
    return {param.values[0] for param in params if param.values[1] is None}


def test_new_routes_are_cases_that_fail_until_declared():
    operations = schema_operations(URLCONF)
    assert set(operations) - set(schema_operations()) == set(NEW_API)
    assert _missing(cases(API_TABLE, {key: key for key in operations}, API_PERSONAS)) == set(NEW_API)
    pages = page_routes(URLCONF)
    assert set(pages) - set(page_routes()) == {NEW_PAGE[0]}
    assert _missing(cases(PAGE_TABLE, pages, PAGE_PERSONAS, PREFIXES)) == {NEW_PAGE[0]}


# (operation, persona, target, what the matrix says): each a way the careless views fail the model.
CAUGHT = [
    ("GET /api/v1/rt-unprotected/queues/", "member_a", SHARED, "shows another tenant's"),  # B's queues listed
    ("GET /api/v1/rt-unprotected/queues/", "member_b", SHARED, "shows another tenant's"),  # A's queues listed
    ("GET /api/v1/rt-unprotected/queues/{id}/", "member_b", OWN, "expected hidden"),  # A's queue: 200, not 404
    ("GET /api/v1/rt-unprotected/queues/{id}/", "token_a", FOREIGN, "expected hidden"),  # A's token reads B's
    ("POST /api/v1/rt-unprotected/queues/{id}/describe/", "viewer_a", OWN, "expected forbidden"),  # 200, not 403
    ("POST /api/v1/rt-unprotected/queues/{id}/describe/", "member_b", OWN, "expected hidden"),  # 200, not 404
    ("POST /api/v1/rt-unprotected/queues/{id}/describe/", "platform_admin", OWN, "0 audit events"),  # no service
]


@pytest.fixture
def unprotected(settings):
    settings.ROOT_URLCONF = URLCONF  # the URL caches are cleared on the change, and again when it is undone


@pytest.mark.parametrize(("operation", "persona", "target", "says"), CAUGHT)
def test_an_operation_without_its_check_fails_the_matrix(world, db, unprotected, operation, persona, target, says):
    _method, route = schema_operations(URLCONF)[operation]
    with pytest.raises(AssertionError, match=says):
        check_operation(world, NEW_API[operation], route, persona, target)


@pytest.mark.parametrize(
    ("persona", "target", "says"),
    [
        ("anonymous", OWN, "expected login"),
        ("member_b", OWN, "expected hidden"),
        ("viewer_a", FOREIGN, "expected hidden"),
    ],
)
def test_a_page_without_its_check_fails_the_matrix(world, db, unprotected, persona, target, says):
    name, spec = NEW_PAGE
    with pytest.raises(AssertionError, match=says):
        check_page(world, spec, name, page_routes(URLCONF)[name], persona, target, ok=spec.ok)


def test_the_check_passes_where_the_careless_view_answers_right(world, db, unprotected):
    _method, route = schema_operations(URLCONF)["GET /api/v1/rt-unprotected/queues/{id}/"]
    check_operation(world, NEW_API["GET /api/v1/rt-unprotected/queues/{id}/"], route, "member_a", OWN)
    name, spec = NEW_PAGE
    check_page(world, spec, name, page_routes(URLCONF)[name], "member_a", OWN, ok=spec.ok)
