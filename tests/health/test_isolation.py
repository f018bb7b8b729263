"""Automatic isolation: XID 79 to a cordoned node and a requeued job; the budget and its one storm alert;
the online-inference guard; and automation never resuming what a human isolated."""

import pytest

from apps.audit.models import AuditEvent
from apps.backends.models import SimWorkload
from apps.fleet.models import Node
from apps.health.models import Incident, IsolationPolicy, NodeHealth, StormAlert
from apps.health.services.housekeeping import close_quiet_incidents
from apps.health.services.incidents import transition_incident
from apps.health.services.runbook import node_action
from apps.notifications.models import Notification, NotificationChannel
from apps.operations.models import Operation
from apps.workloads.services import reconcile_workloads, submit_workload, tick
from tests.health.conftest import cycle, inject, training_spec
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db


def _running(personas, capture, kind="training", **spec):
    with capture(execute=True):
        workload, _ = submit_workload(fresh(personas.member_a), kind=kind, spec=spec)
    reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running" and workload.placements, workload.state_reason
    return workload


def test_xid79_cordons_the_node_and_requeues_the_killed_job(fleet, personas, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    workload = _running(personas, django_capture_on_commit_callbacks, **training_spec())
    node, gpu = workload.placements[0]["node"], workload.placements[0]["gpus"][3]
    cycle(cluster)
    inject(cluster, node, "xid79", gpu)  # the simulator kills the job on that GPU, as a real fault does
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)
    incident = Incident.objects.get(cause="xid-79")
    assert incident.state == "isolated" and incident.auto_isolated_at and incident.severity == "fatal"
    assert f"DCGM_FI_DEV_XID_ERRORS = 79 on GPU {gpu} (UUID GPU-" in incident.evidence[0]["text"]
    assert Node.objects.get(name=node).unschedulable
    assert NodeHealth.objects.get(node__name=node).isolated_by == "auto"
    assert list(incident.workloads.all()) == [workload] and list(incident.tenants.all()) == [personas.a]
    workload.refresh_from_db()
    assert (workload.state, workload.requeues) == ("pending", 1)
    assert workload.backend_name.startswith(f"wl{workload.pk}r1-") and "GPU fault" in workload.state_reason
    assert [e.kind for e in incident.events.all()] == [
        "detected",
        "transition",
        "action",
        "requeue",
        "transition",
        "action",
    ]
    actions = list(
        AuditEvent.objects.filter(action__startswith="incident.").order_by("id").values_list("action", flat=True)
    )
    assert actions == ["incident.open", "incident.transition", "incident.transition"]
    assert AuditEvent.objects.filter(action="workload.requeue", actor_label="system").count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        tick()  # admitted again and resubmitted under its new name: a new run, away from the cordoned node
    reconcile_workloads()
    workload.refresh_from_db()
    rerun = SimWorkload.objects.get(name=workload.backend_name)
    assert workload.state == "running" and rerun.state == "running"
    assert all(p["node"] != node for p in workload.placements)


def test_the_budget_limits_a_storm_and_fires_one_alert(fleet, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    NotificationChannel.objects.create(kind="email", target="oncall@example.com")
    cycle(cluster)
    for name in ("gpu-0001", "gpu-0002", "gpu-0003"):  # three of the pool's four nodes fault at once
        inject(cluster, name, "xid48", 0)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)
    incidents = Incident.objects.filter(cause="xid-48").order_by("node__name")
    assert [i.state for i in incidents] == ["isolated", "detected", "detected"]  # 10 % of 4 nodes: one per hour
    assert all("isolation budget used: 1 of 1" in i.waiting_for for i in incidents[1:])
    assert Node.objects.filter(unschedulable=True).count() == 1
    storm = StormAlert.objects.get()
    assert storm.waiting == 2
    inject(cluster, "gpu-0004", "xid48", 0)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)
    assert Incident.objects.get(node__name="gpu-0004", cause="xid-48").waiting_for and StormAlert.objects.count() == 1
    storms = Notification.objects.filter(subject__startswith="[STORM]")
    assert storms.count() == 1 and storms.get().status == "sent"


def test_a_bigger_budget_isolates_more(fleet, django_capture_on_commit_callbacks):
    IsolationPolicy.objects.create(
        pool=fleet["nodes"][0].pool,
        cordon_severities=["critical", "fatal"],
        max_nodes_per_hour=2,
        max_percent_per_hour=50,
    )
    cycle(fleet["cluster"])
    for name in ("gpu-0001", "gpu-0002", "gpu-0003"):
        inject(fleet["cluster"], name, "xid48", 0)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(fleet["cluster"])
    assert Node.objects.filter(unschedulable=True).count() == 2 and StormAlert.objects.count() == 1


def test_policy_decides_which_severities_isolate(fleet, django_capture_on_commit_callbacks):
    IsolationPolicy.objects.create(pool=fleet["nodes"][0].pool, cordon_severities=["fatal"])
    cycle(fleet["cluster"])
    inject(fleet["cluster"], "gpu-0001", "xid48", 0)  # critical: not automatic in this pool
    with django_capture_on_commit_callbacks(execute=True):
        cycle(fleet["cluster"])
    incident = Incident.objects.get(cause="xid-48")
    assert incident.state == "detected" and "does not isolate critical" in incident.waiting_for
    assert not Node.objects.filter(unschedulable=True).exists()


def test_online_inference_is_not_taken_below_its_minimum(fleet, personas, django_capture_on_commit_callbacks):
    service = _running(
        personas,
        django_capture_on_commit_callbacks,
        kind="inference",
        name="chat",
        tenant="a",
        queue="train",
        engine="vllm",
        model="meta-llama/Llama-3.1-8B-Instruct",
        gpu_model="h100",
        tensor_parallel=8,
        replicas=1,
    )
    node = service.placements[0]["node"]
    cycle(fleet["cluster"])
    inject(fleet["cluster"], node, "row-remap-failure", 2)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(fleet["cluster"])
    incident = Incident.objects.get(cause="row-remap-failure")
    assert incident.state == "detected" and "minimum 1 replicas" in incident.waiting_for
    assert not Node.objects.get(name=node).unschedulable


def _walk_to_validating(node_name, who):
    for incident in Incident.objects.open().filter(node__name=node_name):
        for state in ("repairing", "validating"):
            incident = transition_incident(who, incident, state, "GPU reseated")


def test_automation_resumes_only_what_it_isolated(fleet, personas, settings, django_capture_on_commit_callbacks):
    from apps.backends.simulator.services import clear_fault

    cluster = fleet["cluster"]
    oncall = fresh(personas.oncall)
    cycle(cluster)
    with django_capture_on_commit_callbacks(execute=True):
        node_action(oncall, Node.objects.get(name="gpu-0002"), "cordon", reason="suspicious fan noise")
    faults = [inject(cluster, name, "row-remap-failure", 1) for name in ("gpu-0001", "gpu-0002")]
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)
    # Row-remap failure also logs XID 64: two causes, two incidents per node, one isolation each.
    auto = Incident.objects.filter(node__name="gpu-0001")
    human = Incident.objects.filter(node__name="gpu-0002")
    assert {i.state for i in [*auto, *human]} == {"isolated"} and auto.count() == human.count() == 2
    assert all(i.auto_isolated_at for i in auto) and not any(i.auto_isolated_at for i in human)
    assert "already cordoned by a human" in human.first().events.filter(kind="transition").first().message
    for fault in faults:
        clear_fault(None, fault, "GPU replaced")
    _walk_to_validating("gpu-0001", oncall)
    _walk_to_validating("gpu-0002", oncall)
    cycle(cluster)  # the causes are quiet now
    settings.HEALTH_QUIET_S = 0
    with django_capture_on_commit_callbacks(execute=True):
        assert close_quiet_incidents() == {"resolved": 3, "resumed": 1}
    assert set(Incident.objects.values_list("state", flat=True)) == {"resolved"}
    assert not Node.objects.get(name="gpu-0001").unschedulable  # automation isolated it: resumed
    assert Node.objects.get(name="gpu-0002").unschedulable  # a human isolated it: stays out


def test_a_pool_that_drains_fatal_faults_automatically(fleet, personas, api, django_capture_on_commit_callbacks):
    pool = fleet["nodes"][0].pool
    response = api(fresh(personas.platform_admin)).post(
        "/api/v1/isolation-policies/",
        {
            "cluster": "hsim",
            "pool": pool.name,
            "cordon_severities": ["critical", "fatal"],
            "drain_severities": ["fatal"],
            "max_nodes_per_hour": 2,
            "max_percent_per_hour": 50,
            "reason": "training pool: drain on fatal",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["drain_severities"] == ["fatal"]
    denied = api(fresh(personas.oncall)).post(
        "/api/v1/isolation-policies/",
        {"cordon_severities": [], "max_nodes_per_hour": 0, "max_percent_per_hour": 0},
        format="json",
    )
    assert denied.status_code == 403
    workload = _running(personas, django_capture_on_commit_callbacks, **training_spec(gpus_per_worker=4))
    node = workload.placements[0]["node"]
    free_gpu = ({0, 1, 2, 3, 4, 5, 6, 7} - set(workload.placements[0]["gpus"])).pop()
    cycle(fleet["cluster"])
    inject(fleet["cluster"], node, "xid79", free_gpu)  # a GPU the job does not use: the job survives, is evicted
    with django_capture_on_commit_callbacks(execute=True):
        cycle(fleet["cluster"])
    incident = Incident.objects.get(cause="xid-79")
    assert incident.state == "drained" and incident.auto_isolated_at
    operation = Operation.objects.get(kind="health.drain")
    assert operation.result["evicted"] == [workload.backend_name] and operation.actor is None
    assert SimWorkload.objects.get(name=workload.backend_name).state in {
        "pending",
        "running",
    }  # the backend requeued it


def test_the_inference_floor_counts_a_replica_that_spans_nodes(fleet, personas, django_capture_on_commit_callbacks):
    """A 1-replica service of 16 GPUs spans two 8-GPU nodes: isolating either node takes it to 0 replicas (a
    LeaderWorkerSet group is recreated whole when any of its pods goes). Both the on-call preview and
    automation must see it; before, the other node's worker counted as a whole replica left."""
    from apps.health.services.runbook import impact

    service = _running(
        personas,
        django_capture_on_commit_callbacks,
        kind="inference",
        name="wide",
        tenant="a",
        queue="train",
        engine="vllm",
        model="meta-llama/Llama-3.1-70B-Instruct",
        gpu_model="h100",
        tensor_parallel=16,
        replicas=1,
    )
    assert len({p["node"] for p in service.placements}) == 2
    node = Node.objects.get(name=service.placements[0]["node"])
    assert impact(None, node, "cordon").warnings == [
        f"isolating {node.name} would leave online-inference service a/wide with 0 of its minimum 1 replicas; "
        "a human approves by cordoning it"
    ]
    cycle(fleet["cluster"])
    inject(fleet["cluster"], node.name, "row-remap-failure", 2)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(fleet["cluster"])
    incident = Incident.objects.get(cause="row-remap-failure")
    assert incident.state == "detected" and "a/wide with 0 of its minimum 1 replicas" in incident.waiting_for
    assert not Node.objects.get(pk=node.pk).unschedulable


def test_the_inference_floor_names_every_service_it_would_break(fleet, personas, django_capture_on_commit_callbacks):
    from apps.health.services.runbook import impact

    spec = {
        "tenant": "a",
        "queue": "train",
        "engine": "vllm",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_model": "h100",
        "tensor_parallel": 4,
        "replicas": 1,
    }
    first = _running(personas, django_capture_on_commit_callbacks, kind="inference", name="chat", **spec)
    second = _running(personas, django_capture_on_commit_callbacks, kind="inference", name="embed", **spec)
    node = Node.objects.get(name=first.placements[0]["node"])
    assert second.placements[0]["node"] == node.name  # the simulator packs both on one node
    (warning,) = impact(None, node, "drain").warnings
    assert "a/chat with 0 of its minimum 1 replicas" in warning and "a/embed with 0 of its minimum 1" in warning
