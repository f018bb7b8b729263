"""The fake API server behaves as the real one does where the backend's tests rely on it (through the
official client over HTTP): selectors, paging, resourceVersion preconditions, server-side apply ownership,
dry run, namespaces, evictions against disruption budgets, discovery by installed add-ons."""

from __future__ import annotations

import json

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.backends.k8s_fake import FakeKubernetes


@pytest.fixture
def api(fake):
    config = k8s.Configuration()
    config.host = fake.url
    with k8s.ApiClient(config) as client:
        yield client


def call(client, method, path, body=None, content_type="application/json", **query):
    response = client.call_api(
        path,
        method,
        query_params=list(query.items()),
        header_params={"Accept": "application/json", "Content-Type": content_type},
        body=body,
        _preload_content=False,
        _return_http_data_only=True,
    )
    return json.loads(response.data)


def test_label_and_field_selectors_and_paging(fake, api):
    fake.add_namespace("a")
    for i in range(5):
        fake.add_pod(f"p{i}", "a", f"n{i % 2}", labels={"app": "x" if i < 3 else "y", "tier": str(i)})
    core = k8s.CoreV1Api(api)
    assert [p.metadata.name for p in core.list_namespaced_pod("a", label_selector="app=x,tier notin (0)").items] == [
        "p1",
        "p2",
    ]
    assert [p.metadata.name for p in core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1").items] == [
        "p1",
        "p3",
    ]
    first = core.list_namespaced_pod("a", limit=2)
    second = core.list_namespaced_pod("a", limit=2, _continue=first.metadata._continue)
    third = core.list_namespaced_pod("a", limit=2, _continue=second.metadata._continue)
    names = [p.metadata.name for page in (first, second, third) for p in page.items]
    assert names == ["p0", "p1", "p2", "p3", "p4"] and third.metadata._continue is None
    with pytest.raises(ApiException) as caught:
        core.list_pod_for_all_namespaces(field_selector="spec.colour=red")
    assert caught.value.status == 400


def test_stale_resource_version_is_a_409(fake, api):
    fake.add_node("n1")
    core = k8s.CoreV1Api(api)
    version = core.read_node("n1").metadata.resource_version
    core.patch_node("n1", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(ApiException) as caught:
        call(
            api, "PATCH", "/api/v1/nodes/n1", {"metadata": {"resourceVersion": version}}, "application/merge-patch+json"
        )
    assert caught.value.status == 409 and json.loads(caught.value.body)["reason"] == "Conflict"


def test_server_side_apply_owns_fields_per_manager(fake, api):
    path = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/h100"
    apply = "application/apply-patch+yaml"
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"}}
    call(api, "PATCH", path, {**flavor, "spec": {"nodeLabels": {"gpu": "h100"}}}, apply, fieldManager="gpu-console")
    with pytest.raises(ApiException) as caught:
        call(api, "PATCH", path, {**flavor, "spec": {"nodeLabels": {"gpu": "other"}}}, apply, fieldManager="kubectl")
    assert caught.value.status == 409 and 'conflict with "gpu-console"' in json.loads(caught.value.body)["message"]
    forced = call(
        api,
        "PATCH",
        path,
        {**flavor, "spec": {"nodeLabels": {"gpu": "other"}}},
        apply,
        fieldManager="kubectl",
        force="true",
    )
    assert forced["spec"]["nodeLabels"] == {"gpu": "other"}
    # A manager that stops applying a field removes it.
    call(api, "PATCH", path, {**flavor, "spec": {"tolerations": []}}, apply, fieldManager="gpu-console")
    live = fake.get("kueue.x-k8s.io", "v1beta2", "resourceflavors", "h100")
    assert live["spec"] == {"nodeLabels": {"gpu": "other"}, "tolerations": []}
    assert {m["manager"] for m in live["metadata"]["managedFields"]} == {"gpu-console", "kubectl"}
    with pytest.raises(ApiException) as caught:
        call(api, "PATCH", path, flavor, apply)
    assert caught.value.status == 400  # apply needs a field manager


def test_dry_run_changes_nothing_and_namespaces_must_exist(fake, api):
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "a"},
        "spec": {"hard": {"pods": "1"}},
    }
    with pytest.raises(ApiException) as caught:
        call(
            api,
            "PATCH",
            "/api/v1/namespaces/a/resourcequotas/q",
            quota,
            "application/apply-patch+yaml",
            fieldManager="m",
        )
    assert caught.value.status == 404 and json.loads(caught.value.body)["message"] == 'namespaces "a" not found'
    fake.add_namespace("a")
    answer = call(
        api,
        "PATCH",
        "/api/v1/namespaces/a/resourcequotas/q",
        quota,
        "application/apply-patch+yaml",
        fieldManager="m",
        dryRun="All",
    )
    assert answer["spec"] == {"hard": {"pods": "1"}} and fake.get("", "v1", "resourcequotas", "q", "a") is None


def test_eviction_honours_a_disruption_budget(fake, api):
    fake.add_namespace("a")
    fake.add_pod("p0", "a", "n1", labels={"app": "x"})
    fake.add_pod("p1", "a", "n1", labels={"app": "x"})
    fake.seed(
        "policy",
        "v1",
        "poddisruptionbudgets",
        {
            "metadata": {"name": "b", "namespace": "a"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
        },
    )
    core = k8s.CoreV1Api(api)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p0", "namespace": "a"}}
    core.create_namespaced_pod_eviction("p0", "a", eviction)
    assert fake.get("", "v1", "pods", "p0", "a")["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction("p1", "a", {**eviction, "metadata": {"name": "p1", "namespace": "a"}})
    assert caught.value.status == 429
    assert json.loads(caught.value.body)["details"]["causes"][0]["reason"] == "DisruptionBudget"


def test_discovery_serves_only_installed_add_ons(db):
    fake = FakeKubernetes(addons={"kueue"}).start()
    try:
        config = k8s.Configuration()
        config.host = fake.url
        with k8s.ApiClient(config) as client:
            groups = {g.name for g in k8s.ApisApi(client).get_api_versions().groups}
            assert "kueue.x-k8s.io" in groups and "batch.volcano.sh" not in groups
            resources = call(client, "GET", "/api/v1")["resources"]
            assert {
                "name": "pods/eviction",
                "singularName": "",
                "namespaced": True,
                "kind": "Eviction",
                "verbs": ["create"],
            } in resources
            with pytest.raises(ApiException) as caught:
                call(client, "GET", "/apis/batch.volcano.sh/v1alpha1/jobs")
            assert caught.value.status == 404
    finally:
        fake.stop()
