"""deploy/kubernetes/base/rbac.yaml is valid, and grants every request the backend makes (and only those kinds)."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from apps.backends.render.validate import K8S_VERSIONS
from tests.backends.kubernetes.scenario import run_everything

RBAC = Path(__file__).resolve().parents[3] / "deploy" / "kubernetes" / "base" / "rbac.yaml"
DISCOVERY = {"/version", "/version/", "/api", "/apis"}


def documents() -> list[dict]:
    return [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_rbac_manifest_is_strictly_valid(version):
    kinds = []
    for doc in documents():
        assert kubernetes_validate.validate(doc, version, strict=True) == version
        kinds.append(doc["kind"])
    assert kinds == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"]


def test_binding_names_the_role_and_account():
    ns, account, role, binding = documents()
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpu-console"}
    subject = {"kind": "ServiceAccount", "name": "gpu-console", "namespace": ns["metadata"]["name"]}
    assert binding["subjects"] == [subject]
    assert account["metadata"]["namespace"] == ns["metadata"]["name"]
    assert role["metadata"]["name"] == "gpu-console"


def allowed() -> set[tuple[str, str, str]]:
    role = documents()[2]
    out = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    assert "*" not in (group, resource, verb), "least privilege: no wildcards"
                    out.add((group, resource, verb))
    return out


def needed(method: str, path: str, content_type: str, query: dict | None = None) -> set[tuple[str, str, str]]:
    """The (group, resource, verb) an API server authorizes for one request (a GET with `?watch` is the watch
    verb: https://kubernetes.io/docs/reference/access-authn-authz/authorization/#determine-the-request-verb)."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    if method == "GET" and (query or {}).get("watch") in ("1", "true"):
        return {(group, resource, "watch")}
    if method == "GET":
        return {(group, resource, "get" if named else "list")}
    if method == "PATCH" and content_type == "application/apply-patch+yaml":
        return {(group, resource, "patch"), (group, resource, "create")}  # apply creates what is missing
    verb = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}[method]
    return {(group, resource, verb)}


@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
def test_every_request_the_backend_makes_is_allowed(db, fake, queueing):
    fake.reset_requests()
    run_everything(fake, queueing)
    grants = allowed()
    used = set()
    for request in fake.requests:
        if request.path in DISCOVERY:
            continue  # discovery is open to every authenticated account (system:discovery)
        for need in needed(request.method, request.path, request.content_type, request.query):
            assert need in grants, f"{request.method} {request.path} needs {need}, which rbac.yaml does not grant"
            used.add(need)
    assert ("", "pods/eviction", "create") in used and ("", "nodes", "patch") in used
    assert ("", "pods/log", "get") in used  # the workload's log, streamed
    assert ("rbac.authorization.k8s.io", "roles", "delete") in used  # a routed service's router Role, cancelled
    assert ("", "nodes", "watch") in used and ("", "pods", "watch") in used
