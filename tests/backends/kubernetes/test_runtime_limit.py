"""The runtime limit on the control-plane model (issue 19): a training job whose work outlasts its max_runtime_s is
stopped by the cluster (Kueue: the Job's activeDeadlineSeconds, Failed with reason DeadlineExceeded; Volcano: each
pod's activeDeadlineSeconds, the pods Failed with reason DeadlineExceeded) and ends `failed` with the reason
"runtime limit reached", never `succeeded`. A GPU fault on its node afterwards neither requeues it nor credits
anyone for it: the limit ended the run, not the fault."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.chargeback.credits import credit_lost_runs
from apps.chargeback.models import Credit
from apps.fleet.models import Node
from apps.health.models import Incident, LostRun
from apps.health.services.runbook import node_action
from apps.operations.runner import execute_operation
from apps.workloads.services.outbox import drain_outbox
from apps.workloads.services.reconcile import RUNTIME_GRACE
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.kubernetes.journey import inference, seed_fleet, seed_hypernodes, start, training
from tests.utils.personas import fresh


@pytest.fixture(params=["kueue", "volcano"])
def journey(request, personas, api, django_capture_on_commit_callbacks):
    fake = FakeKubernetes().start()
    seed_fleet(fake)
    if request.param == "volcano":
        seed_hypernodes(fake)
    yield start(personas, fake, api, django_capture_on_commit_callbacks, queueing=request.param)
    fake.stop()


def test_a_job_past_its_max_runtime_fails_with_the_runtime_limit_as_its_reason(journey):
    workload = journey.submit(
        "training", training("overrun", gpus_per_worker=8, command=["sleep", "600"], max_runtime_s=60)
    )
    journey.wait(workload, {"running"})
    workload = journey.wait(workload, {"succeeded", "failed"}, seconds=180, step=10)
    assert workload.state == "failed", workload.state_reason
    assert workload.state_reason.startswith("runtime limit reached (max_runtime_s 60): "), workload.state_reason
    assert "DeadlineExceeded" in workload.state_reason or "Volcano job Failed" in workload.state_reason


def test_a_fault_after_the_runtime_limit_requeues_nothing_and_credits_nobody(journey, personas):
    workload = journey.submit(
        "training", training("overrun", gpus_per_worker=8, command=["sleep", "600"], max_runtime_s=60)
    )
    journey.wait(workload, {"running"})
    (node_name,) = journey.nodes(workload)
    workload = journey.wait(workload, {"failed"}, seconds=180, step=10)
    assert workload.placements and workload.placements[0]["node"] == node_name  # where it last ran
    # Minutes later an XID 79 on the node where it ran: on-call cordons the node, which requeues the training
    # jobs the fault killed there and records their lost runs for credit.
    node = Node.objects.get(cluster=journey.cluster, name=node_name)
    now = timezone.now()
    Incident.objects.create(
        node=node,
        cause="xid-79",
        rule_key="xid-fatal",
        ruleset_version=1,
        title="GPU fell off the bus (XID 79)",
        severity="fatal",
        action="drain",
        detected_at=now,
        last_seen_at=now,
    )
    operation = node_action(fresh(personas.oncall), node, "cordon", reason="XID 79")
    execute_operation(operation.pk)
    operation.refresh_from_db()
    assert operation.status == "succeeded", operation.error
    assert operation.result["requeued"] == []
    workload = journey.state(workload)
    assert (workload.state, workload.requeues) == ("failed", 0)
    assert workload.state_reason.startswith("runtime limit reached")
    assert not LostRun.objects.exists()
    assert credit_lost_runs() == 0 and not Credit.objects.exists()


@pytest.fixture
def console_on_cluster_time(journey, monkeypatch):
    """The console's clock is the modelled cluster's (real time plus what the test advanced), as in production
    where both read the same wall clock."""
    monkeypatch.setattr(timezone, "now", journey.fake.now)
    return journey


def test_a_run_the_backend_would_restart_past_its_limit_is_stopped_by_the_console(console_on_cluster_time):
    """With retries, Volcano's RestartJob policy starts again a job whose pod its activeDeadlineSeconds failed (a
    new pod, a new deadline); Kueue's Job fails at its job-wide deadline. Either way the run ends `failed` at its
    limit: on Volcano the console stops it once the limit and RUNTIME_GRACE have passed, and deletes its Job."""
    journey = console_on_cluster_time
    workload = journey.submit(
        "training", training("overrun", gpus_per_worker=8, command=["sleep", "7200"], max_runtime_s=600, retries=2)
    )
    workload = journey.wait(workload, {"running"})
    started = workload.started_at
    workload = journey.wait(workload, {"failed"}, seconds=1200, step=30)
    assert workload.state_reason.startswith("runtime limit reached (max_runtime_s 600): "), workload.state_reason
    assert workload.finished_at - started <= timedelta(seconds=600) + RUNTIME_GRACE + timedelta(seconds=30)
    with journey.capture(execute=True):
        drain_outbox()
    journey.settle(60)  # the stopped Job's pods terminate for their grace period
    assert journey.pods(workload) == [], [p["metadata"]["name"] for p in journey.pods(workload)]
    if journey.cluster.connection["queueing"] == "volcano":
        assert workload.state_reason.endswith("the console stopped it"), workload.state_reason
        assert journey.fake.objects("batch.volcano.sh", "v1alpha1", "jobs") == []
        assert journey.state(workload).state == "failed"  # stopping it changed nothing else
    else:
        assert "DeadlineExceeded" in workload.state_reason


def test_a_service_with_a_runtime_limit_is_stopped_by_the_console(console_on_cluster_time):
    """A Deployment has no deadline of its own: the console stops a service at its max_runtime_s (plus grace)."""
    journey = console_on_cluster_time
    workload = journey.submit("inference", inference("brief", max_runtime_s=300))
    workload = journey.wait(workload, {"running"}, seconds=300, step=20)
    workload = journey.wait(workload, {"failed"}, seconds=900, step=30)
    assert workload.state_reason.startswith("runtime limit reached (max_runtime_s 300): still running "), (
        workload.state_reason
    )
    with journey.capture(execute=True):
        drain_outbox()
    journey.settle(150)  # a serving pod's grace period is 120 s
    assert journey.pods(workload) == []
    assert journey.fake.objects("apps", "v1", "deployments") == []
