"""A shared GPU end to end on a Kubernetes cluster: the console refuses, by name, a sharing mode whose pool the
cluster's inventory does not show; once GPU Feature Discovery labels such nodes and the inventory syncs, the
pushed quota has the pool's flavor and the workload's pods select exactly it (time-slicing and MPS alike)."""

from __future__ import annotations

from fractions import Fraction

from apps.backends.registry import get_backend
from apps.fleet.services import sync_inventory
from apps.tenancy.desired_state import build_desired_state
from apps.workloads import services
from apps.workloads.models import Workload
from apps.workloads.rendering import render_context
from tests.backends.kubernetes.test_console import k8s, submit  # noqa: F401 - the fixture and the helper
from tests.utils.personas import fresh
from tests.workloads.conftest import build_fleet, training_spec

TIME_SLICE = {"mode": "time-slice", "replicas": 4}
MPS = {"mode": "mps", "replicas": 4}


def submit_time_sliced(api, personas, capture) -> Workload:
    workload = submit(api, personas, capture, name="notebook", workers=1, gpus_per_worker=1, sharing=TIME_SLICE)
    services.reconcile_workloads()
    workload.refresh_from_db()
    return workload


def test_time_slicing_without_a_time_sliced_pool_is_refused_with_the_reason(
    k8s,  # noqa: F811
    fake,
    personas,
    api,
    django_capture_on_commit_callbacks,
):
    """Refused at submission (400 naming the field), not accepted and then failed: nothing is stored or applied."""
    with django_capture_on_commit_callbacks(execute=True):
        response = api(fresh(personas.member_a)).post(
            "/api/v1/workloads/",
            {"kind": "training", "spec": training_spec(name="notebook", gpus_per_worker=1, sharing=TIME_SLICE)},
            format="json",
        )
    assert response.status_code == 400, response.json()
    reason = " ".join(response.json()["fields"]["sharing.replicas"])
    assert "no time-sliced h100 pool" in reason
    assert not Workload.objects.filter(name="notebook").exists()
    assert fake.objects("batch", "v1", "jobs") == []


def test_time_slicing_on_a_synced_time_sliced_pool_gets_its_flavor(
    k8s,  # noqa: F811
    fake,
    personas,
    api,
    django_capture_on_commit_callbacks,
):
    fake.add_node(
        "ts-01",
        gpus=4,
        product="NVIDIA-H100-80GB-HBM3-SHARED",
        labels={"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
    )
    assert sync_inventory(k8s.pk).ok
    get_backend(k8s).push_quota(build_desired_state(k8s))
    flavor = fake.get("kueue.x-k8s.io", "v1beta2", "resourceflavors", "h100-shared-4")
    workload = submit_time_sliced(api, personas, django_capture_on_commit_callbacks)
    assert workload.state != "failed", workload.state_reason
    job = fake.get("batch", "v1", "jobs", workload.backend_name, "a-train")
    selector = job["spec"]["template"]["spec"]["nodeSelector"]
    assert flavor["spec"]["nodeLabels"].items() <= selector.items()
    cq = fake.get("kueue.x-k8s.io", "v1beta2", "clusterqueues", "a-train")
    shared = next(f for f in cq["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "h100-shared-4")
    assert {r["name"]: r["nominalQuota"] for r in shared["resources"]}["nvidia.com/gpu"] == 16 * 4


def test_mps_and_time_slicing_of_the_same_replicas_each_get_their_own_flavor_and_nodes(
    k8s,  # noqa: F811
    fake,
    personas,
    api,
    django_capture_on_commit_callbacks,
):
    """GFD labels a time-sliced and an MPS node alike but for nvidia.com/gpu.sharing-strategy: the pushed flavors
    carry it, so Kueue admits an MPS job in the MPS flavor only and kube-scheduler binds its pods to the MPS node
    (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing-mps.html)."""
    fake.add_node("ts-01", gpus=4, product="NVIDIA-H100-80GB-HBM3", time_slicing=4)
    with django_capture_on_commit_callbacks(execute=True):
        refused = api(fresh(personas.member_a)).post(
            "/api/v1/workloads/",
            {"kind": "training", "spec": training_spec(name="eval", gpus_per_worker=1, sharing=MPS)},
            format="json",
        )
    assert refused.status_code == 400, "only the time-sliced pool is synced: no MPS pool yet"
    assert "no MPS h100 pool with 4 replicas" in " ".join(refused.json()["fields"]["sharing.replicas"])
    fake.add_node("mps-01", gpus=4, product="NVIDIA-H100-80GB-HBM3", mps=4)
    assert sync_inventory(k8s.pk).ok
    get_backend(k8s).push_quota(build_desired_state(k8s))
    flavors = {
        name: fake.get("kueue.x-k8s.io", "v1beta2", "resourceflavors", name)["spec"]["nodeLabels"]
        for name in ("h100-shared-4", "h100-mps-4")
    }
    assert flavors["h100-mps-4"] == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "mps",
    }
    assert flavors["h100-shared-4"]["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    workload = submit(
        api, personas, django_capture_on_commit_callbacks, name="eval", workers=3, gpus_per_worker=1, sharing=MPS
    )
    fake.tick()
    services.reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running", workload.state_reason
    kueue_workload = next(
        w
        for w in fake.objects("kueue.x-k8s.io", "v1beta2", "workloads")
        if workload.backend_name in w["metadata"]["name"]
    )
    assert [f for ps in kueue_workload["status"]["admission"]["podSetAssignments"] for f in ps["flavors"].values()] == [
        "h100-mps-4"
    ] * 3
    pods = [p for p in fake.objects("", "v1", "pods") if p["metadata"]["name"].startswith(workload.backend_name)]
    assert len(pods) == 3 and {p["spec"]["nodeName"] for p in pods} == {"mps-01"}
    assert workload.admission.gpus == Fraction(3, 4)  # three replicas of 1/4: quota counts them as time-slice's


def test_a_simulated_cluster_renders_every_sharing_mode(personas):
    """The simulator runs every sharing mode; its rendering shows what a Kubernetes cluster would get, unchecked."""
    fleet = build_fleet(personas)
    spec = training_spec(workers=1, gpus_per_worker=1, sharing=TIME_SLICE)
    workload, _ = services.submit_workload(fresh(personas.member_a), kind="training", spec=spec)
    assert workload.cluster == fleet["cluster"] and render_context(workload).gpu_pools is None
