"""A shared GPU end to end on a Kubernetes cluster: the console refuses, by name, a sharing mode whose pool the
cluster's inventory does not show; once GPU Feature Discovery labels such nodes and the inventory syncs, the
pushed quota has the pool's flavor and the workload's pods select exactly it."""

from __future__ import annotations

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


def test_a_simulated_cluster_renders_every_sharing_mode(personas):
    """The simulator runs every sharing mode; its rendering shows what a Kubernetes cluster would get, unchecked."""
    fleet = build_fleet(personas)
    spec = training_spec(workers=1, gpus_per_worker=1, sharing=TIME_SLICE)
    workload, _ = services.submit_workload(fresh(personas.member_a), kind="training", spec=spec)
    assert workload.cluster == fleet["cluster"] and render_context(workload).gpu_pools is None
