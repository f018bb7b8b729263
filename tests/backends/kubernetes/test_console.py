"""The console end to end on a Kubernetes cluster: inventory sync, quota push, submission through the API and
the outbox (with the manifest the console renders), reconcile, cancel, and backend failures on the outbox."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.backends.registry import get_backend
from apps.core.errors import InvalidInput
from apps.fleet.models import Cluster, GpuModel, Node, NodePool
from apps.fleet.services import create_cluster, sync_inventory, update_cluster
from apps.tenancy import services as tenancy
from apps.tenancy.desired_state import build_desired_state
from apps.workloads import services
from apps.workloads.models import OutboxEntry, Workload
from tests.backends.kubernetes.conftest import seed_nodes
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


def test_submit_runs_reconciles_and_cancels(k8s, fake, personas, api, django_capture_on_commit_callbacks):
    assert Node.objects.filter(cluster=k8s).count() == 2
    workload = submit(api, personas, django_capture_on_commit_callbacks)
    job = fake.get("batch", "v1", "jobs", workload.backend_name, "a-train")
    assert job is not None, [r.path for r in fake.requests_to("PATCH")]
    labels = job["metadata"]["labels"]
    assert labels["gpu-console/workload"] == str(workload.pk)
    # The label names a LocalQueue in the Job's own namespace, and that LocalQueue (pushed with the quota) points
    # at the queue's ClusterQueue: https://kueue.sigs.k8s.io/docs/concepts/local_queue/
    local_queue = fake.get("kueue.x-k8s.io", "v1beta2", "localqueues", labels["kueue.x-k8s.io/queue-name"], "a-train")
    assert local_queue is not None, [
        o["metadata"]["name"] for o in fake.objects("kueue.x-k8s.io", "v1beta2", "localqueues")
    ]
    assert local_queue["spec"]["clusterQueue"] == "a-train"
    assert fake.get("kueue.x-k8s.io", "v1beta2", "clusterqueues", "a-train") is not None
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
    # The outcome is audited once, with the cluster's refusal: the start alone said nothing of it.
    failed = AuditEvent.objects.get(action="operation.failed", target_id=str(operation.pk))
    assert failed.actor_label == "oncall" and "could not be evicted" in failed.after["error"]


def test_a_runbook_cordon_names_who_asked_on_the_node(personas, fake, api, django_capture_on_commit_callbacks):
    """`gpu-console/cordoned-by` carries the user who cordoned or drained (an annotation value may be any string,
    https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations/), the console itself for
    automation; the inventory reads it back as the node's state reason."""
    from apps.fleet.models import Cluster
    from apps.operations.models import Operation
    from apps.operations.services import start_operation

    seed_nodes(fake, count=2, gpus=8)
    cluster = Cluster.objects.create(name="k8s", kind="kubernetes", connection={"api_url": fake.url})
    assert sync_inventory(cluster.pk).ok
    first, second = Node.objects.filter(cluster=cluster).order_by("name")
    with django_capture_on_commit_callbacks(execute=True):
        response = api(fresh(personas.oncall)).post(
            f"/api/v1/nodes/{first.pk}/cordon/", {"reason": "fan"}, format="json"
        )
    operation = Operation.objects.get(pk=response.json()["id"])
    assert operation.status == "succeeded", operation.error
    annotations = fake.get("", "v1", "nodes", "gpu-01")["metadata"]["annotations"]
    assert annotations["gpu-console/cordoned-by"] == "oncall"
    assert annotations["gpu-console/cordon-reason"] == "gpu-console: fan"
    with django_capture_on_commit_callbacks(execute=True):
        start_operation(None, "health.drain", target=second, params={"node_id": second.pk, "automatic": True})
    assert fake.get("", "v1", "nodes", "gpu-02")["metadata"]["annotations"]["gpu-console/cordoned-by"] == "gpu-console"
    # The backend's own steps reach the operation's log as they happen (the timed call keeps drain's signature).
    assert "cordoned gpu-02" in Operation.objects.get(kind="health.drain").log
    assert sync_inventory(cluster.pk).ok
    assert Node.objects.get(pk=first.pk).state_reason == "cordoned by oncall: gpu-console: fan"


def test_the_clusters_leaf_label_reaches_the_submitted_job(
    k8s, fake, personas, api, django_capture_on_commit_callbacks
):
    """`topology_labels` in the connection settings: a gang kept on one leaf switch has its pod affinity on the
    site's own leaf label, the one its nodes carry (not the console's default gpu-console/leaf-switch)."""
    connection = {**k8s.connection, "topology_labels": {"leaf": "network.example.com/leaf"}}
    update_cluster(fresh(personas.platform_admin), k8s, connection=connection)
    workload = submit(api, personas, django_capture_on_commit_callbacks, workers=2, topology="leaf")
    job = fake.get("batch", "v1", "jobs", workload.backend_name, "a-train")
    assert job is not None, workload.state_reason
    terms = job["spec"]["template"]["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [term["topologyKey"] for term in terms] == ["network.example.com/leaf"]


@pytest.mark.parametrize(
    ("setting", "problem"),
    [
        ({"leaf": "network example/leaf"}, "topology_labels.leaf: 'network example/leaf' is not a node label key"),
        ({"switch": "site/switch"}, "topology_labels.switch: not a topology level"),
    ],
)
def test_a_bad_topology_labels_setting_is_refused_and_changes_nothing(k8s, personas, setting, problem):
    admin = fresh(personas.platform_admin)
    before = dict(k8s.connection)
    with pytest.raises(InvalidInput) as exc:
        update_cluster(admin, k8s, connection={**before, "topology_labels": setting})
    assert problem in str(exc.value)
    k8s.refresh_from_db()
    assert k8s.connection == before
    with pytest.raises(InvalidInput) as exc:
        create_cluster(admin, name="k8s-2", kind="kubernetes", connection={"topology_labels": setting})
    assert problem in str(exc.value) and not Cluster.objects.filter(name="k8s-2").exists()


def test_work_on_a_tainted_pool_tolerates_the_pools_taints_and_runs(
    k8s, fake, personas, api, django_capture_on_commit_callbacks
):
    """The site reserves its H100 pool with a taint: inventory sync gives the pool the taint all its nodes carry
    (not a node's own state: cordon, not-ready), the Job tolerates it, and kube-scheduler places it."""
    reserved = {"key": "dedicated", "value": "training", "effect": "NoSchedule"}
    with fake.lock:  # changes as the API makes them: a new resourceVersion each, seen by watches
        resource = fake.resource("", "v1", "nodes")
        for (_ns, name), node in list(fake.store.bucket(resource).items()):
            node["metadata"]["labels"]["gpu-console/pool"] = "h100-train"
            node["spec"]["taints"] = [reserved]
            if name == "gpu-02":
                node["spec"]["taints"].append({"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"})
            fake.store.put(resource, node)
    assert sync_inventory(k8s.pk).ok
    assert NodePool.objects.get(cluster=k8s, name="h100-train").taints == [reserved]
    workload = submit(api, personas, django_capture_on_commit_callbacks)
    job = fake.get("batch", "v1", "jobs", workload.backend_name, "a-train")
    tolerations = job["spec"]["template"]["spec"]["tolerations"]
    assert {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"} in tolerations
    assert not any(t["key"].startswith("node.kubernetes.io/") for t in tolerations)
    services.reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running", workload.state_reason
    assert [p["node"] for p in workload.placements] == ["gpu-01"]  # gpu-02's memory pressure is not tolerated


def test_a_drain_never_takes_an_inference_service_below_its_min_replicas(
    k8s, fake, personas, api, django_capture_on_commit_callbacks
):
    """Online inference gets a PodDisruptionBudget (policy/v1, minAvailable = min_replicas): the Eviction API refuses
    to drain its last serving replica (without it the drain takes the service down); the node it does not run on
    drains; cancelling the service takes the budget away with it."""
    spec = {
        "name": "llama",
        "tenant": "a",
        "queue": "train",
        "model": "meta-llama/Llama-3.1-70B-Instruct",
        "gpu_model": "h100",
        "tensor_parallel": 8,
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = api(fresh(personas.member_a)).post(
            "/api/v1/workloads/", {"kind": "inference", "spec": spec}, format="json"
        )
    assert response.status_code == 201, response.json()
    workload = Workload.objects.get(pk=response.json()["id"])
    budget = fake.get("policy", "v1", "poddisruptionbudgets", workload.backend_name, "a-train")
    assert budget is not None, workload.state_reason
    assert budget["spec"] == {
        "minAvailable": 1,
        "selector": {"matchLabels": {"gpu-console/workload": str(workload.pk)}},
    }
    fake.advance(30)
    services.reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running", workload.state_reason
    serving = workload.placements[0]["node"]
    idle = next(n for n in ("gpu-01", "gpu-02") if n != serving)
    # A refused eviction is not retried for the default 300 s here.
    update_cluster(fresh(personas.platform_admin), k8s, connection={**k8s.connection, "drain_timeout_s": 0})
    backend = get_backend(k8s)
    assert backend.drain(idle, "maintenance").blocked == {}
    refused = backend.drain(serving, "maintenance")
    assert refused.blocked and not refused.evicted, refused
    assert "disruption budget" in " ".join(refused.blocked.values())
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_workload(fresh(personas.member_a), workload)
    assert fake.get("policy", "v1", "poddisruptionbudgets", workload.backend_name, "a-train") is None


def test_a_queue_whose_full_name_is_too_long_still_reaches_its_local_queue(
    k8s, fake, personas, api, django_capture_on_commit_callbacks
):
    """ "<tenant>-<queue>" above 63 characters: the quota renderer shortens the ClusterQueue and LocalQueue name,
    and the workload's queue-name label carries that same shortened name (it was refused as not a label value)."""
    admin = fresh(personas.platform_admin)
    long_name = "q" * 63
    queue = tenancy.create_queue(admin, tenant=personas.a, name=long_name)
    tenancy.bind_queue(admin, queue, cluster=k8s, namespaces=["a-long"])
    tenancy.set_quota(admin, queue=queue, gpu_model=GpuModel.objects.get(code="h100"), guaranteed=0)
    get_backend(k8s).push_quota(build_desired_state(k8s))
    workload = submit(api, personas, django_capture_on_commit_callbacks, queue=long_name)
    job = fake.get("batch", "v1", "jobs", workload.backend_name, "a-long")
    assert job is not None, Workload.objects.get(pk=workload.pk).state_reason
    label = job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert len(label) <= 63 and label.startswith("a-qqq")
    local_queue = fake.get("kueue.x-k8s.io", "v1beta2", "localqueues", label, "a-long")
    assert local_queue is not None and local_queue["spec"]["clusterQueue"] == label
