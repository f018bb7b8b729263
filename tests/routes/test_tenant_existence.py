"""A tenant you may not view does not exist for you: naming it in a request body answers exactly as naming a
tenant that does not exist at all (issue 20: "unknown and forbidden tenants answer alike"), so a member of A
cannot probe which tenant slugs are taken.

Every create of the API schema whose body names a tenant is tried as A's member with B's slug and with a slug
nobody has; the two answers must have the same status and error code.
"""

from __future__ import annotations

import re

import pytest

from tests.routes.matrix import api_client, openapi_schema, schema_operations
from tests.routes.world import training_spec

# The creates that name a tenant in their body: operation -> body for a tenant slug (and the queue, where the body
# needs one, by that tenant's queue name).
BODIES = {
    "POST /api/v1/tenants/": lambda slug: {"name": "RT new", "slug": "rt-new", "parent": slug},
    "POST /api/v1/memberships/": lambda slug: {"user": "loner", "tenant": slug, "role": "member"},
    "POST /api/v1/group-mappings/": lambda slug: {"group": "rt-group", "tenant": slug, "role": "member"},
    "POST /api/v1/service-accounts/": lambda slug: {"username": "rt-new-ci", "tenant": slug},
    "POST /api/v1/tokens/": lambda slug: {"name": "rt-token", "role": "viewer", "tenant": slug},
    "POST /api/v1/queues/": lambda slug: {"tenant": slug, "name": "rt-new-q"},
    "POST /api/v1/budgets/": lambda slug: {"tenant": slug, "gpu_model": "h100", "guaranteed": 30},
    "POST /api/v1/spend-budgets/": lambda slug: {"tenant": slug, "monthly_amount": "1.00"},
    "POST /api/v1/notification-channels/": lambda slug: {"tenant": slug, "kind": "email", "target": "rt@example.com"},
    "POST /api/v1/templates/": lambda slug: {
        "tenant": slug,
        "name": "rt-tpl",
        "kind": "training",
        "spec": training_spec(slug, "rt-x", "q"),
    },
    "POST /api/v1/workloads/": lambda slug: {"kind": "training", "spec": training_spec(slug, "rt-x", "q")},
}


def _shape(response, slug: str) -> tuple:
    """The answer with the slug the request named taken out: what is left must not depend on the tenant."""
    body = response.json() or {}
    message = re.sub(rf"\b{re.escape(slug)}\b", "…", body.get("message", ""))
    return response.status_code, body.get("code"), message, body.get("fields")


# (persona, a tenant that exists outside the persona's view): the other organization, and a team of one's own
# organization (a member of A does not see A's teams), for a person and for a token.
OUT_OF_VIEW = [("member_a", "b"), ("member_a", "a-team"), ("member_b", "a"), ("token_a", "b")]


@pytest.mark.parametrize("operation", list(BODIES))
@pytest.mark.parametrize(("persona", "slug"), OUT_OF_VIEW, ids=[f"{p}-{s}" for p, s in OUT_OF_VIEW])
def test_a_tenant_out_of_view_answers_like_an_unknown_one(world, db, operation, persona, slug):
    assert operation in schema_operations(), f"{operation} is gone from the schema: update BODIES"
    body = BODIES[operation]
    client = api_client(world, persona)
    hidden = client.post(operation.split(" ")[1], body(slug), format="json")
    unknown = client.post(operation.split(" ")[1], body("no-such-tenant"), format="json")
    assert hidden.status_code in (400, 403, 404), hidden.content
    assert _shape(hidden, slug) == _shape(unknown, "no-such-tenant"), (
        f"tenant b: {hidden.content[:300]!r}\nunknown: {unknown.content[:300]!r}"
    )


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


# The same for the other rows a body names by id or name: a queue (by id), a user (a token's owner).
QUEUE_BODIES = {
    "POST /api/v1/quotas/": lambda queue: {"queue": queue, "gpu_model": "h100", "guaranteed": 13},
    "POST /api/v1/quotas/preview/": lambda queue: {"queue": queue, "gpu_model": "h100", "guaranteed": 2},
    "POST /api/v1/quota-requests/": lambda queue: {
        "queue": queue,
        "gpu_model": "h100",
        "guaranteed": 20,
        "justification": "x",
    },
    "POST /api/v1/admission/preview/": lambda queue: {
        "queue": queue,
        "gpu_model": "h100",
        "gpus": 8,
        "tier": "training",
    },
}


@pytest.mark.parametrize("operation", list(QUEUE_BODIES))
def test_a_queue_out_of_view_answers_like_an_unknown_one(world, db, operation):
    assert operation in schema_operations(), f"{operation} is gone from the schema: update QUEUE_BODIES"
    body, path = QUEUE_BODIES[operation], operation.split(" ")[1]
    client = api_client(world, "member_b")
    hidden = client.post(path, body(world.own.queue.pk), format="json")
    unknown = client.post(path, body(999_999), format="json")
    assert hidden.status_code == 404, hidden.content
    assert _shape(hidden, str(world.own.queue.pk)) == _shape(unknown, "999999"), (hidden.content, unknown.content)


def test_every_create_naming_a_queue_is_listed():
    schema = openapi_schema()
    components = schema["components"]["schemas"]
    naming = set()
    for path, operations in schema["paths"].items():
        post = operations.get("post")
        if not post or "{" in path:
            continue
        ref = post.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
        if "queue" in components.get(ref.get("$ref", "").rsplit("/", 1)[-1], {}).get("properties", {}):
            naming.add(f"POST {path}")
    assert naming == set(QUEUE_BODIES), f"update QUEUE_BODIES: {sorted(naming ^ set(QUEUE_BODIES))}"


def test_a_service_account_out_of_view_answers_like_an_unknown_user(world, db):
    """Issuing a token for A's service account, as B's member: as for a username nobody has (not 'You may not
    manage tenant a', which named the account's tenant)."""
    client = api_client(world, "member_b")
    body = {"name": "rt-token", "role": "viewer"}
    hidden = client.post("/api/v1/tokens/", {**body, "user": world.own.service_account.username}, format="json")
    unknown = client.post("/api/v1/tokens/", {**body, "user": "nobody-here"}, format="json")
    assert hidden.status_code == 404, hidden.content
    assert _shape(hidden, world.own.service_account.username) == _shape(unknown, "nobody-here")
