"""A tenant you may not view does not exist for you: naming it in a request body answers exactly as naming a
tenant that does not exist at all (issue 20: "unknown and forbidden tenants answer alike"), so a member of A
cannot probe which tenant slugs are taken.

Every create of the API schema whose body names a tenant is tried as A's member with B's slug and with a slug
nobody has; the two answers must have the same status and error code.
"""

from __future__ import annotations

import pytest

from tests.routes.matrix import api_client, openapi_schema, schema_operations
from tests.routes.world import training_spec

ISSUE_20 = "issue 20: a tenant you may not see answers 403 'You may not manage tenant …', an unknown one 400"
ISSUE_20_ALSO = (
    "issue 20 (the same tenant-existence leak; this create is not listed there): a tenant you may not see answers "
    "403 or 404, an unknown one 400"
)

# The creates that name a tenant in their body: operation -> body for a tenant slug (and the queue, where the body
# needs one, by that tenant's queue name), and the known bug, if any.
BODIES = {
    "POST /api/v1/tenants/": (lambda slug: {"name": "RT new", "slug": "rt-new", "parent": slug}, ISSUE_20_ALSO),
    "POST /api/v1/memberships/": (lambda slug: {"user": "loner", "tenant": slug, "role": "member"}, ISSUE_20),
    "POST /api/v1/service-accounts/": (lambda slug: {"username": "rt-new-ci", "tenant": slug}, ISSUE_20),
    "POST /api/v1/tokens/": (lambda slug: {"name": "rt-token", "role": "viewer", "tenant": slug}, ISSUE_20_ALSO),
    "POST /api/v1/queues/": (lambda slug: {"tenant": slug, "name": "rt-new-q"}, ISSUE_20),
    "POST /api/v1/budgets/": (lambda slug: {"tenant": slug, "gpu_model": "h100", "guaranteed": 30}, ISSUE_20),
    "POST /api/v1/spend-budgets/": (lambda slug: {"tenant": slug, "monthly_amount": "1.00"}, ISSUE_20_ALSO),
    "POST /api/v1/notification-channels/": (
        lambda slug: {"tenant": slug, "kind": "email", "target": "rt@example.com"},
        None,
    ),
    "POST /api/v1/templates/": (
        lambda slug: {"tenant": slug, "name": "rt-tpl", "kind": "training", "spec": training_spec(slug, "rt-x", "q")},
        None,
    ),
    "POST /api/v1/workloads/": (lambda slug: {"kind": "training", "spec": training_spec(slug, "rt-x", "q")}, None),
}


def _params():
    for operation, (_body, known) in BODIES.items():
        marks = [pytest.mark.xfail(strict=True, reason=known)] if known else []
        yield pytest.param(operation, marks=marks, id=operation)


@pytest.mark.parametrize("operation", list(_params()))
def test_a_tenant_out_of_view_answers_like_an_unknown_one(world, db, operation):
    assert operation in schema_operations(), f"{operation} is gone from the schema: update BODIES"
    body, _known = BODIES[operation]
    client = api_client(world, "member_a")
    hidden = client.post(operation.split(" ")[1], body("b"), format="json")
    unknown = client.post(operation.split(" ")[1], body("no-such-tenant"), format="json")
    assert hidden.status_code in (400, 403, 404), hidden.content
    answers = [(r.status_code, (r.json() or {}).get("code")) for r in (hidden, unknown)]
    assert answers[0] == answers[1], f"tenant b: {hidden.content[:300]!r}\nunknown: {unknown.content[:300]!r}"


def test_every_create_naming_a_tenant_is_listed():
    """A new create whose body names a tenant belongs in BODIES (found by its request schema's `tenant`/`parent`)."""
    schema = openapi_schema()
    components = schema["components"]["schemas"]
    naming = set()
    for path, operations in schema["paths"].items():
        post = operations.get("post")
        if not post or "{" in path:
            continue
        content = post.get("requestBody", {}).get("content", {}).get("application/json", {})
        ref = content.get("schema", {}).get("$ref", "")
        properties = components.get(ref.rsplit("/", 1)[-1], {}).get("properties", {})
        spec = properties.get("spec", {})
        if {"tenant", "parent"} & set(properties) or spec:
            naming.add(f"POST {path}")
    assert naming <= set(BODIES), f"add these creates to BODIES: {sorted(naming - set(BODIES))}"
