"""Requeue on the control-plane model (issue 19): a training job whose pod died on a GPU fault is requeued by on-call
and runs again as a new Job, on Kueue and on Volcano, even when reconcile comes between the dispatch of the new
run and the worker's submit (the tick's order in production)."""

from __future__ import annotations

import pytest

from apps.tenancy.services.admissions import run_admission_pass
from apps.workloads.services.outbox import drain_outbox
from apps.workloads.services.reconcile import dispatch_admitted, reconcile_workloads
from apps.workloads.services.requeue import FAULT, requeue_workload
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.kubernetes.journey import H100_NODES, seed_fleet, seed_hypernodes, start, training
from tests.utils.personas import fresh


@pytest.fixture(params=["kueue", "volcano"])
def journey(request, personas, api, django_capture_on_commit_callbacks):
    fake = FakeKubernetes().start()
    seed_fleet(fake)
    if request.param == "volcano":
        seed_hypernodes(fake)
    yield start(personas, fake, api, django_capture_on_commit_callbacks, queueing=request.param)
    fake.stop()


def test_a_job_requeued_after_a_gpu_fault_runs_again_as_a_new_job(journey, personas):
    workload = journey.submit("training", training("pretrain", workers=1, gpus_per_worker=8, command=["sleep", "600"]))
    journey.wait(workload, {"running"})
    first = workload.backend_name
    (pod,) = journey.pods(workload)
    journey.fake.crash(pod["metadata"]["namespace"], pod["metadata"]["name"])  # its GPU fell off the bus
    workload = journey.wait(workload, {"failed"})

    requeued = requeue_workload(fresh(personas.oncall), workload, cause=FAULT, reason="XID 79 on its GPU")
    assert requeued.state == "pending" and requeued.backend_name == f"wl{workload.pk}r1-pretrain"
    run_admission_pass()
    assert dispatch_admitted() == 1
    reconcile_workloads()  # before the worker took the new run's submit entry
    workload = journey.state(workload)
    assert workload.state == "admitted", journey.why(workload)
    with journey.capture(execute=True):
        drain_outbox()
    workload = journey.wait(workload, {"running"})
    pods = {p["metadata"]["name"]: p for p in journey.pods(workload)}
    running = {n for n, p in pods.items() if p["status"].get("phase") == "Running"}
    # The new run's pod runs on an H100; the first run's crashed pod stays Failed (its Job keeps it).
    assert len(running) == 1 and all(n.startswith(workload.backend_name) for n in running), pods
    assert {pods[n]["spec"]["nodeName"] for n in running} <= set(H100_NODES)
    assert {p["status"]["phase"] for n, p in pods.items() if n.startswith(first)} == {"Failed"}
    journey.wait(workload, {"succeeded"}, seconds=900, step=60)
    assert first != workload.backend_name
