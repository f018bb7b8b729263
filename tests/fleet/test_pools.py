"""Node pools and their fabric (docs/networking.md): who may read and declare it, what is refused and why, and the
RDMA resources inventory sync finds on the nodes."""

import pytest

from apps.audit.models import AuditEvent
from apps.fleet.models import Cluster, Node, NodePool
from tests.utils.personas import fresh

INFINIBAND = {"fabric": "infiniband", "rdma_resource": "rdma/ib", "nccl_ib_hca": "=mlx5_0:1,mlx5_1:1"}


def pool(cluster, name="h100-training") -> NodePool:
    return NodePool.objects.get(cluster=cluster, name=name)


def test_everyone_with_a_role_lists_the_pools_with_their_fabric(sim, personas, api):
    for persona in ["member_a", "member_b", "viewer_a", "oncall", "tenant_admin_a"]:
        body = api(fresh(personas.user(persona))).get("/api/v1/pools/?cluster=sim").json()
        assert body["count"] == 2, persona
        assert {p["name"]: p["fabric"] for p in body["results"]} == {"h100-training": "none", "l40s-inference": "none"}
    detail = api(fresh(personas.member_a)).get(f"/api/v1/pools/{pool(sim).pk}/").json()
    assert detail["cluster"] == "sim" and detail["gpu_model"] == "h100" and detail["rdma_per_pod"] == 1
    assert api().get("/api/v1/pools/").status_code == 401


def test_a_platform_admin_declares_infiniband_with_one_audit_event(sim, personas, api):
    target = pool(sim)
    body = {**INFINIBAND, "nccl_socket_ifname": "=eth0", "reason": "HDR fabric installed"}
    response = api(fresh(personas.platform_admin)).patch(f"/api/v1/pools/{target.pk}/", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["fabric"] == "infiniband" and response.json()["nccl_socket_ifname"] == "=eth0"
    target.refresh_from_db()
    assert (target.fabric, target.rdma_resource, target.nccl_ib_hca) == ("infiniband", "rdma/ib", "=mlx5_0:1,mlx5_1:1")
    event = AuditEvent.objects.get(action="pool.update")
    assert event.reason == "HDR fabric installed"
    assert (event.before["fabric"], event.after["fabric"]) == ("none", "infiniband")
    assert api(fresh(personas.member_a)).get("/api/v1/pools/?fabric=infiniband").json()["count"] == 1


@pytest.mark.parametrize("persona", ["tenant_admin_a", "oncall", "member_a", "viewer_a"])
def test_only_platform_admins_declare_a_fabric(sim, personas, api, persona):
    response = api(fresh(personas.user(persona))).patch(f"/api/v1/pools/{pool(sim).pk}/", INFINIBAND, format="json")
    assert response.status_code == 403
    assert pool(sim).fabric == "none" and not AuditEvent.objects.filter(action="pool.update").exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"fabric": "infiniband"}, "rdma_resource"),  # RDMA on Kubernetes needs the device plugin's resource
        ({"fabric": "ethernet", "rdma_resource": "rdma/ib"}, "rdma_resource"),
        ({**INFINIBAND, "nccl_ib_hca": "mlx5_0 mlx5_1"}, "nccl_ib_hca"),
        ({**INFINIBAND, "nccl_ib_gid_index": 3}, "nccl_ib_gid_index"),  # RoCE's
        ({**INFINIBAND, "slurm_gres": "ib:1"}, "slurm_gres"),  # Slurm's
        ({**INFINIBAND, "rdma_resource": "nvidia.com/gpu"}, "rdma_resource"),
        ({"fabric": "token-ring"}, "fabric"),
        ({**INFINIBAND, "rdma_per_pod": 0}, "rdma_per_pod"),
        ({"name": "renamed"}, "name"),
    ],
)
def test_a_fabric_that_cannot_work_is_refused_naming_the_field_and_nothing_changes(sim, personas, api, body, field):
    target = pool(sim)
    response = api(fresh(personas.platform_admin)).patch(f"/api/v1/pools/{target.pk}/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"], response.json()
    target.refresh_from_db()
    assert (target.fabric, target.rdma_resource) == ("none", "")
    assert not AuditEvent.objects.filter(action="pool.update").exists()


def test_a_fabric_error_is_in_the_readers_language(sim, personas, api):
    client = api(fresh(personas.platform_admin))
    response = client.patch(
        f"/api/v1/pools/{pool(sim).pk}/", {"fabric": "infiniband"}, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans"
    )
    assert response.status_code == 400
    message = " ".join(response.json()["fields"]["rdma_resource"])
    assert "rdma/ib" in message and any("\u4e00" <= char <= "\u9fff" for char in message), message


def test_on_a_kueue_cluster_the_rdma_resource_must_be_left_out_of_quota(personas, api):
    """Kueue admits a workload only when its ClusterQueue covers every resource it requests: an RDMA resource the
    site's Kueue does not exclude would keep every RDMA pod pending, so it is refused when declared."""
    cluster = Cluster.objects.create(name="k8s", kind="kubernetes", connection={"api_url": "https://k8s.example:6443"})
    target = NodePool.objects.create(cluster=cluster, name="hgx")
    client = api(fresh(personas.platform_admin))
    response = client.patch(f"/api/v1/pools/{target.pk}/", INFINIBAND, format="json")
    assert response.status_code == 400 and "excludeResourcePrefixes" in " ".join(
        response.json()["fields"]["rdma_resource"]
    )
    cluster.connection = {**cluster.connection, "kueue_excluded_resources": ["rdma/"]}
    cluster.save()
    assert client.patch(f"/api/v1/pools/{target.pk}/", INFINIBAND, format="json").status_code == 200
    volcano = Cluster.objects.create(name="vc", kind="kubernetes", connection={"queueing": "volcano"})
    other = NodePool.objects.create(cluster=volcano, name="hgx")
    assert client.patch(f"/api/v1/pools/{other.pk}/", INFINIBAND, format="json").status_code == 200


def test_a_slurm_pool_takes_a_gres_not_a_kubernetes_resource(personas, api):
    cluster = Cluster.objects.create(name="hpc", kind="slurm", connection={})
    target = NodePool.objects.create(cluster=cluster, name="gpu")
    client = api(fresh(personas.platform_admin))
    response = client.patch(f"/api/v1/pools/{target.pk}/", INFINIBAND, format="json")
    assert response.status_code == 400 and "rdma_resource" in response.json()["fields"]
    body = {"fabric": "infiniband", "nccl_ib_hca": "mlx5", "slurm_gres": "ib:1"}
    assert client.patch(f"/api/v1/pools/{target.pk}/", body, format="json").status_code == 200
    target.refresh_from_db()
    assert target.slurm_gres == "ib:1"


def test_inventory_sync_records_the_rdma_resources_each_node_advertises(sim, personas, api):
    """The simulated HGX (NVLink) nodes advertise one InfiniBand HCA per GPU as rdma/ib; PCIe L40S nodes none."""
    by_model = {n.gpu_model.code: n.extended_resources for n in Node.objects.filter(cluster=sim)}
    assert by_model == {"h100": {"rdma/ib": 8}, "l40s": {}}
    nodes = api(fresh(personas.member_a)).get("/api/v1/nodes/?cluster=sim&model=h100").json()["results"]
    assert {n["name"]: n["extended_resources"] for n in nodes} == {n["name"]: {"rdma/ib": 8} for n in nodes}
