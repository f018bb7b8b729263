"""What the OpenAPI schema promises for every operation, walked over the whole generated schema (issue 20).

tests/routes/test_schemathesis.py then holds the server to it with generated requests.
"""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.core.errors import InvalidInput
from apps.tenancy.models import QueueBinding
from tests.routes.matrix import openapi_schema
from tests.utils.personas import fresh

WRITES = {"post", "put", "patch", "delete"}


def _operations():
    for path, operations in openapi_schema()["paths"].items():
        for method, operation in operations.items():
            if method in {"get", *WRITES}:
                yield method, path, operation


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _arrays_without_max(schema: dict, node, where: str, seen: set) -> list[str]:
    """Every array a request may send, anywhere in its body, that has no maxItems."""
    if isinstance(node, list):
        return [hit for i, item in enumerate(node) for hit in _arrays_without_max(schema, item, where, seen)]
    if not isinstance(node, dict):
        return []
    if "$ref" in node:
        if node["$ref"] in seen:
            return []
        seen.add(node["$ref"])
        return _arrays_without_max(schema, _resolve(schema, node), f"{where} → {node['$ref']}", seen)
    hits = [where] if node.get("type") == "array" and "maxItems" not in node else []
    for key, value in node.items():
        hits += _arrays_without_max(schema, value, f"{where}/{key}", seen)
    return hits


def test_every_list_a_request_may_send_is_capped():
    """10,000 namespaces in one bind call were accepted: every array in a request body has a maxItems."""
    schema = openapi_schema()
    unbounded = []
    for method, path, operation in _operations():
        body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body:
            unbounded += _arrays_without_max(schema, body, f"{method.upper()} {path}", set())
        for parameter in operation.get("parameters", []):
            unbounded += _arrays_without_max(schema, parameter.get("schema", {}), f"{method} {path} ?", set())
    assert not unbounded, "arrays with no maxItems (set max_length on the ListField):\n" + "\n".join(unbounded)


@pytest.mark.parametrize(("method", "path"), [(m, p) for m, p, _ in _operations()])
def test_every_operation_declares_the_errors_it_can_answer(method, path):
    responses = openapi_schema()["paths"][path][method]["responses"]
    expected = {"400", "401", "403", "404"} | ({"409", "415"} if method in WRITES else set())
    assert expected <= set(responses), f"{method.upper()} {path} declares {sorted(responses)}"
    error = openapi_schema()["paths"][path][method]["responses"]["404"]["content"]["application/json"]["schema"]
    assert set(_resolve(openapi_schema(), error)["required"]) == {"message", "code", "fields", "request_id"}


def test_binding_ten_thousand_namespaces_is_a_400(personas, api):
    from apps.fleet.services import create_simulated_cluster
    from apps.tenancy import services as tenancy

    cluster = create_simulated_cluster(None, "sim", {"nodes": 1, "models": {"h100": 1.0}})
    queue = tenancy.create_queue(fresh(personas.platform_admin), tenant=personas.a, name="q")
    events = AuditEvent.objects.count()
    body = {"cluster": cluster.name, "namespaces": [f"ns-{i}" for i in range(10_000)]}
    response = api(fresh(personas.platform_admin)).post(f"/api/v1/queues/{queue.pk}/bind/", body, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "namespaces" in response.json()["fields"]
    assert not QueueBinding.objects.filter(queue=queue).exists() and AuditEvent.objects.count() == events
    with pytest.raises(InvalidInput, match="at most 100"):
        tenancy.bind_queue(fresh(personas.platform_admin), queue, cluster=cluster, namespaces=body["namespaces"])


def test_page_size_must_be_a_whole_number_from_one(personas, api):
    client = api(fresh(personas.platform_admin))
    for bad in ("0", "-5", "ten", ""):
        response = client.get(f"/api/v1/tenants/?page_size={bad}")
        assert response.status_code == 400 and "page_size" in response.json()["fields"], (bad, response.content)
    assert client.get("/api/v1/tenants/?page_size=1").json()["results"][0]["slug"] == "a"
    assert len(client.get("/api/v1/tenants/?page_size=99999").json()["results"]) == 3  # capped, not refused
    page_size = next(
        p for p in openapi_schema()["paths"]["/api/v1/tenants/"]["get"]["parameters"] if p["name"] == "page_size"
    )
    assert page_size["schema"]["minimum"] == 1


@pytest.mark.parametrize(
    "path",
    ["/api/v1/clusters/a%00b/", "/api/v1/capacity/?cluster=a%00b", "/api/v1/tenants/?q=%00", "/api/v1/tenants/?%00=1"],
)
def test_a_nul_character_in_the_path_or_query_is_a_400(personas, api, path):
    response = api(fresh(personas.platform_admin)).get(path)
    assert response.status_code == 400 and response.json()["code"] == "bad_request", response.content


def test_a_nul_character_in_a_json_string_is_a_400(personas, api):
    body = '{"name": "x", "kind": "kubernetes", "connection": {"api_url": "https://a\\u0000b"}}'
    response = api(fresh(personas.platform_admin)).generic("POST", "/api/v1/clusters/", body, "application/json")
    assert response.status_code == 400 and response.json()["code"] == "parse_error", response.content


@pytest.mark.parametrize("connection", [[1, 2], True, "text", 3])
def test_a_cluster_connection_is_an_object(personas, api, connection):
    body = {"name": "odd", "kind": "kubernetes", "connection": connection}
    response = api(fresh(personas.platform_admin)).post("/api/v1/clusters/", body, format="json")
    assert response.status_code == 400 and "connection" in response.json()["fields"], response.content


def test_nullable_answers_are_marked_and_blank_ones_carry_no_format():
    schemas = openapi_schema()["components"]["schemas"]
    for component, field in [
        ("MembershipBrief", "tenant"),
        ("User", "owner_tenant"),
        ("Me", "owner_tenant"),
        ("Channel", "tenant"),
        ("Operation", "tenant"),
        ("Operation", "actor"),
        ("Period", "closed_by"),
        ("QuotaRequest", "decided_by"),
        ("RateCard", "created_by"),
        ("Workload", "created_by"),
    ]:
        assert schemas[component]["properties"][field].get("nullable") is True, (component, field)
    assert "format" not in schemas["User"]["properties"]["email"]
    assert "pattern" not in schemas["Cluster"]["properties"]["secret_env"]
    assert "pattern" in schemas["ClusterRequest"]["properties"]["secret_env"]  # what you send is still checked


@pytest.mark.parametrize("name", ["cordon", "uncordon", "drain", "resume", "request-reset", "mark-rma"])
def test_runbook_actions_declare_their_body_and_both_answers(name):
    """They had no request body in the schema and only a 200, though they take {reason, dry_run, incident} and
    answer 202 with the operation (200 is the dry run's impact)."""
    operation = openapi_schema()["paths"][f"/api/v1/nodes/{{id}}/{name}/"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert set(_resolve(openapi_schema(), body)["properties"]) == {"reason", "dry_run", "incident"}
    assert {"200", "202"} <= set(operation["responses"])
    assert operation["responses"]["202"]["content"]["application/json"]["schema"]["$ref"].endswith("/Operation")
