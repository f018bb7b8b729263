"""The console end to end on a Kubernetes cluster: inventory sync, quota push, submission through the API and
the outbox (with the manifest the console renders), reconcile, cancel, and backend failures on the outbox."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.backends.registry import get_backend
from apps.fleet.models import GpuModel, Node
from apps.fleet.services import create_cluster, sync_inventory
from apps.tenancy import services as tenancy
from apps.tenancy.desired_state import build_desired_state
from apps.workloads import services
from apps.workloads.models import OutboxEntry, Workload
from tests.backends.kubernetes.conftest import KUEUE_NEVER_ADMITS, seed_nodes
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec


@pytest.fixture
def k8s(personas, fake):
    admin = fresh(personas.platform_admin)
    seed_nodes(fake, count=2, gpus=8)
    cluster = create_cluster(
        admin, name="k8s", kind="kubernetes", connection={"api_url": fake.url, "queueing": "kueue"}
    )
    assert sync_inventory(cluster.pk).ok
    h100 = GpuModel.objects.get(code="h100")
    tenancy.set_guarantee_cap(admin, tenant=personas.a, gpu_model=h100, guaranteed=16)
    train = tenancy.create_queue(admin, tenant=personas.a, name="train")
    tenancy.bind_queue(admin, train, cluster=cluster, namespaces=["a-train"])
    tenancy.set_quota(admin, queue=train, gpu_model=h100, guaranteed=16)
    get_backend(cluster).push_quota(build_desired_state(cluster))
    return cluster


def submit(api, personas, capture, **overrides):
    with capture(execute=True):
        response = api(fresh(personas.member_a)).post(
            "/api/v1/workloads/", {"kind": "training", "spec": training_spec(**overrides)}, format="json"
        )
    assert response.status_code == 201, response.json()
    return Workload.objects.get(pk=response.json()["id"])


@KUEUE_NEVER_ADMITS
def test_submit_runs_reconciles_and_cancels(k8s, fake, personas, api, django_capture_on_commit_callbacks):
    assert Node.objects.filter(cluster=k8s).count() == 2
    workload = submit(api, personas, django_capture_on_commit_callbacks)
    job = fake.get("batch", "v1", "jobs", workload.backend_name, "a-train")
    assert job is not None, [r.path for r in fake.requests_to("PATCH")]
    labels = job["metadata"]["labels"]
    assert labels["gpu-console/workload"] == str(workload.pk) and labels["kueue.x-k8s.io/queue-name"] == "a-train"
    assert job["spec"]["template"]["spec"]["priorityClassName"] == "training"
    services.reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running", workload.state_reason
    assert [p["node"] for p in workload.placements] == ["gpu-01"]
    assert sync_inventory(k8s.pk).ok
    assert Node.objects.get(cluster=k8s, name="gpu-01").gpu_allocated == 8
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_workload(fresh(personas.member_a), workload)
    workload.refresh_from_db()
    assert workload.state == "cancelled"
    assert fake.get("batch", "v1", "jobs", workload.backend_name, "a-train")["metadata"]["deletionTimestamp"]


def test_an_api_server_error_makes_the_submission_retry(k8s, fake, personas, api, django_capture_on_commit_callbacks):
    fake.fail(500, method="PATCH", message="etcdserver: leader changed")
    workload = submit(api, personas, django_capture_on_commit_callbacks)
    entry = OutboxEntry.objects.get(workload=workload, action="submit")
    assert entry.status == "pending" and entry.attempts == 1
    assert "the API server failed (500): etcdserver: leader changed" in entry.last_error
    assert workload.events.filter(kind="backend-retry").exists()
    OutboxEntry.objects.filter(pk=entry.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert services.process_outbox_entry(entry.pk) == "submitted"
    assert fake.get("batch", "v1", "jobs", workload.backend_name, "a-train") is not None


def test_a_forbidden_submission_fails_with_the_reason(k8s, fake, personas, api, django_capture_on_commit_callbacks):
    fake.fail(
        403,
        method="PATCH",
        message='jobs.batch is forbidden: User "system:serviceaccount:gpu-console:gpu-console" cannot patch',
    )
    workload = submit(api, personas, django_capture_on_commit_callbacks)
    workload.refresh_from_db()
    assert workload.state == "failed"
    assert "403 Forbidden" in workload.state_reason and "rbac.yaml" in workload.state_reason


@KUEUE_NEVER_ADMITS
def test_scheduler_events_reach_the_workload_timeline_once(
    k8s, fake, personas, api, django_capture_on_commit_callbacks
):
    backend = get_backend(k8s)
    for node in ("gpu-01", "gpu-02"):
        backend.cordon(node, "maintenance")
    workload = submit(api, personas, django_capture_on_commit_callbacks)
    services.reconcile_workloads()
    services.reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "admitted"
    message = (
        "0/2 nodes are available: 2 node(s) were unschedulable. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert workload.state_reason == message
    lines = list(workload.events.filter(kind="cluster").values_list("message", flat=True))
    assert lines == [f"FailedScheduling: {message}"]
    page = api(fresh(personas.member_a)).get(f"/workloads/{workload.pk}/")
    assert page.status_code == 200 and b"FailedScheduling" in page.content


def test_a_runbook_drain_that_a_disruption_budget_blocks_fails_and_keeps_the_cordon(personas, fake, api):
    from apps.fleet.models import Cluster
    from apps.operations.models import Operation
    from apps.operations.runner import execute_operation

    seed_nodes(fake, count=2, gpus=8)
    fake.add_namespace("serve")
    for i in range(2):
        fake.add_pod(f"vllm-{i}", "serve", "gpu-01", gpus=4, labels={"app": "vllm"})
    budget = {"minAvailable": 2, "selector": {"matchLabels": {"app": "vllm"}}}
    fake.seed(
        "policy", "v1", "poddisruptionbudgets", {"metadata": {"name": "vllm", "namespace": "serve"}, "spec": budget}
    )
    cluster = Cluster.objects.create(
        name="k8s", kind="kubernetes", connection={"api_url": fake.url, "drain_timeout_s": 0}
    )
    assert sync_inventory(cluster.pk).ok
    node = Node.objects.get(cluster=cluster, name="gpu-01")
    response = api(fresh(personas.oncall)).post(f"/api/v1/nodes/{node.pk}/drain/", {"reason": "fan"}, format="json")
    assert response.status_code == 202, response.json()
    execute_operation(response.json()["id"])
    operation = Operation.objects.get(pk=response.json()["id"])
    assert operation.status == "failed"
    assert (
        "not evicted: serve/vllm-0: The disruption budget vllm needs 2 healthy pods and has 2 currently"
        in operation.log
    )
    assert "2 pod(s) on gpu-01 could not be evicted" in operation.error
    assert fake.get("", "v1", "nodes", "gpu-01")["spec"]["unschedulable"] is True
