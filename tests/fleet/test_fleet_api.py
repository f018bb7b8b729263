"""Fleet API and pages: who may see and do what; bad input; the simulator's fault and time endpoints."""

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.fleet.models import Cluster, Node
from apps.fleet.services import sync_inventory
from tests.utils.personas import fresh


def test_everyone_with_a_role_sees_the_fleet(sim, personas, api):
    for persona in ["member_a", "member_b", "viewer_a", "oncall"]:
        body = api(fresh(personas.user(persona))).get("/api/v1/nodes/?cluster=sim").json()
        assert body["count"] == 4, persona
    assert api(token=personas.token_a_raw).get("/api/v1/gpus/?cluster=sim&page_size=1").json()["count"] == 32
    assert api().get("/api/v1/nodes/").status_code == 401


def test_node_filters(sim, personas, api):
    client = api(fresh(personas.member_a))
    h100 = client.get("/api/v1/nodes/?cluster=sim&model=h100").json()
    assert h100["count"] == 2 and {n["gpu_model"] for n in h100["results"]} == {"h100"}
    assert client.get("/api/v1/nodes/?state=down").json()["count"] == 0
    assert client.get("/api/v1/nodes/?has_free=true").json()["count"] == 4
    assert client.get("/api/v1/nodes/?state=sideways").status_code == 400
    assert client.get("/api/v1/gpu-models/").json()[0]["name"] == "A100-SXM4-80GB"


def test_cluster_admin_rules(sim, personas, api):
    shape = {"nodes": 2, "models": {"h100": 1.0}}
    assert (
        api(fresh(personas.oncall))
        .post("/api/v1/clusters/", {"name": "x", "kind": "simulated", "connection": shape}, format="json")
        .status_code
        == 403
    )
    assert (
        api(fresh(personas.tenant_admin_a))
        .patch("/api/v1/clusters/sim/", {"description": "x"}, format="json")
        .status_code
        == 403
    )
    assert api(fresh(personas.member_a)).post("/api/v1/clusters/sim/sync/", {}, format="json").status_code == 403
    response = api(fresh(personas.oncall)).post("/api/v1/clusters/sim/sync/", {}, format="json")
    assert response.status_code == 202 and response.json()["kind"] == "fleet.sync"
    report = api(fresh(personas.oncall)).post("/api/v1/clusters/sim/test-connection/", {}, format="json").json()
    assert report["ok"] and "simulated fleet" in report["message"]


@pytest.mark.parametrize(
    ("connection", "field"),
    [
        ({"nodes": 0, "models": {"h100": 1.0}}, "nodes"),
        ({"nodes": 4, "models": {"x100": 1.0}}, "models"),
        ({"nodes": 4, "models": {"h100": 0.5, "a100": 0.3}}, "models"),
        ({"nodes": 4, "colour": "red"}, "colour"),
    ],
)
def test_invalid_fleet_shape_names_the_field(personas, api, connection, field):
    events = AuditEvent.objects.count()
    response = api(fresh(personas.platform_admin)).post(
        "/api/v1/clusters/", {"name": "bad", "kind": "simulated", "connection": connection}, format="json"
    )
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()
    assert not Cluster.objects.filter(name="bad").exists() and AuditEvent.objects.count() == events


def test_cluster_name_must_be_dns_label(personas, api):
    response = api(fresh(personas.platform_admin)).post(
        "/api/v1/clusters/", {"name": "Bad Name", "kind": "simulated", "connection": {"nodes": 1}}, format="json"
    )
    assert response.status_code == 400 and "name" in response.json()["fields"]


def test_fault_api(sim, personas, api):
    oncall = api(fresh(personas.oncall))
    unknown_node = oncall.post(
        "/api/v1/simulator/faults/", {"cluster": "sim", "node": "gpu-9999", "kind": "xid79"}, format="json"
    )
    assert unknown_node.status_code == 404 and "gpu-9999" in unknown_node.json()["message"]
    unknown_gpu = oncall.post(
        "/api/v1/simulator/faults/", {"cluster": "sim", "node": "gpu-0001", "kind": "xid79", "gpu": 9}, format="json"
    )
    assert unknown_gpu.status_code == 404 and "gpu" in unknown_gpu.json()["fields"]
    assert (
        oncall.post(
            "/api/v1/simulator/faults/", {"cluster": "nope", "node": "gpu-0001", "kind": "xid79"}, format="json"
        ).status_code
        == 404
    )
    assert (
        api(fresh(personas.member_a))
        .post("/api/v1/simulator/faults/", {"cluster": "sim", "node": "gpu-0001", "kind": "xid79"}, format="json")
        .status_code
        == 403
    )
    created = oncall.post(
        "/api/v1/simulator/faults/",
        {"cluster": "sim", "node": "gpu-0001", "kind": "xid79", "gpu": 3, "reason": "drill"},
        format="json",
    )
    assert created.status_code == 201 and created.json()["active"]
    sync_inventory(sim.pk)
    node = Node.objects.get(cluster=sim, name="gpu-0001")
    assert node.gpu_unhealthy == 1 and node.gpus.get(index=3).health == "unhealthy"
    cleared = oncall.delete(f"/api/v1/simulator/faults/{created.json()['id']}/?reason=reseated")
    assert cleared.status_code == 200 and not cleared.json()["active"]
    sync_inventory(sim.pk)
    assert Node.objects.get(cluster=sim, name="gpu-0001").gpu_unhealthy == 0


def test_advance_api(sim, personas, api):
    response = api(fresh(personas.oncall)).post(
        "/api/v1/simulator/advance/", {"cluster": "sim", "minutes": 90}, format="json"
    )
    assert response.status_code == 200 and response.json()["sim_time"]
    bad = api(fresh(personas.oncall)).post(
        "/api/v1/simulator/advance/", {"cluster": "sim", "minutes": -1}, format="json"
    )
    assert bad.status_code == 400 and "minutes" in bad.json()["fields"]


def test_fleet_pages_render(sim, personas, client, django_assert_max_num_queries):
    client.force_login(personas.member_a)
    pages = [
        reverse("fleet:cluster_list"),
        reverse("fleet:cluster_detail", args=["sim"]),
        reverse("fleet:node_list") + "?cluster=sim",
        reverse("fleet:node_detail", args=["sim", "gpu-0001"]),
        reverse("fleet:node_telemetry", args=["sim", "gpu-0001"]),
        reverse("fleet:gpu_models"),
        reverse("fleet:capacity") + "?cluster=sim",
    ]
    for url in pages:
        with django_assert_max_num_queries(30):
            response = client.get(url)
        assert response.status_code == 200, url
    telemetry = client.get(reverse("fleet:node_telemetry", args=["sim", "gpu-0001"])).content.decode()
    assert 'data-testid="telemetry-table"' in telemetry and "°C" in telemetry
    assert client.get(reverse("fleet:node_detail", args=["sim", "gpu-9999"])).status_code == 404
    detail = client.get(reverse("fleet:node_detail", args=["sim", "gpu-0001"])).content.decode()
    assert 'data-testid="fault-form"' not in detail  # members cannot inject faults


def test_fault_form_on_node_page(sim, personas, client):
    client.force_login(personas.oncall)
    url = reverse("fleet:node_fault", args=["sim", "gpu-0002"])
    client.post(url, {"kind": "exporter-down", "reason": "drill"})
    telemetry = client.get(reverse("fleet:node_telemetry", args=["sim", "gpu-0002"])).content.decode()
    assert 'data-testid="telemetry-error"' in telemetry and "503" in telemetry
    response = client.post(url, {"kind": "bogus"}, follow=True)
    assert "bogus" in response.content.decode()  # the service's message is shown


def test_cluster_list_counts_nodes_and_gpus(sim, personas, client):
    client.force_login(personas.member_a)
    row = next(c for c in client.get(reverse("fleet:cluster_list")).context["clusters"] if c.name == "sim")
    assert (row.node_count, row.gpu_count) == (4, 32)


def test_failing_cluster_shows_its_error_and_keeps_inventory(sim, personas, client, monkeypatch):
    from apps.backends.base import RetryableBackendError
    from apps.fleet import services

    class Down:
        def inventory(self):
            raise RetryableBackendError("connect timeout after 10 s: https://sim.invalid:6443")

    monkeypatch.setattr(services, "get_backend", lambda cluster: Down())
    assert not sync_inventory(sim.pk).ok
    client.force_login(personas.member_a)
    page = client.get(reverse("fleet:cluster_detail", args=["sim"])).content.decode()
    assert "Last sync failed" in page and "connect timeout after 10 s" in page
    assert client.get(reverse("fleet:node_list") + "?cluster=sim").context["paginator"].count == 4


@pytest.mark.parametrize("kind", ["kubernetes", "simulated"])
@pytest.mark.parametrize("sync_enabled", [False, True])
def test_cluster_create_takes_sync_enabled(personas, api, kind, sync_enabled):
    """`sync_enabled` is in the create schema; it was a 500 (`create_cluster() got an unexpected keyword`)."""
    connection = {"nodes": 1, "models": {"h100": 1.0}} if kind == "simulated" else {"api_url": "https://k8s.example"}
    body = {"name": "new", "kind": kind, "connection": connection, "sync_enabled": sync_enabled}
    response = api(fresh(personas.platform_admin)).post("/api/v1/clusters/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["sync_enabled"] is sync_enabled
    assert Cluster.objects.get(name="new").sync_enabled is sync_enabled


@pytest.mark.parametrize(
    "version_body",
    [{"unexpected": True}, [], "null", "<html>not Kubernetes</html>", {"gitVersion": None}],
    ids=["other-object", "array", "null", "html", "no-version"],
)
def test_test_connection_to_a_server_that_is_not_kubernetes_says_so(personas, api, version_body):
    """An api_url whose /version answers something else: a clear report, not a ValueError (a 500)."""
    from tests.health.http_helpers import serve

    with serve({"/version": (200, version_body), "/version/": (200, version_body)}) as server:
        cluster = Cluster.objects.create(
            name="odd", kind="kubernetes", connection={"api_url": server.url, "request_timeout_s": 5}
        )
        response = api(fresh(personas.platform_admin)).post(f"/api/v1/clusters/{cluster.name}/test-connection/")
    assert response.status_code == 200, response.content
    report = response.json()
    assert report["ok"] is False
    assert "odd" in report["message"] and "version" in report["message"], report


@pytest.mark.parametrize("body", [[1], "text", {"reason": ["a"]}, {"colour": "red"}])
def test_sync_refuses_a_body_that_is_not_its_own(sim, personas, api, body):
    """`{reason?}` only: a list body was a 500 (`'list' object has no attribute 'get'`)."""
    response = api(fresh(personas.oncall)).post(f"/api/v1/clusters/{sim.name}/sync/", body, format="json")
    assert response.status_code == 400, response.content


def test_sync_takes_a_reason(sim, personas, api):
    response = api(fresh(personas.oncall)).post(f"/api/v1/clusters/{sim.name}/sync/", {"reason": "now"}, format="json")
    assert response.status_code == 202 and response.json()["kind"] == "fleet.sync"
