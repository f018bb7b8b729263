"""What the Backend interface answers besides the scheduler calls, for each kind (the callers never ask the kind)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.backends.base import PermanentBackendError
from apps.backends.registry import get_backend
from apps.fleet.models import Cluster
from apps.fleet.services import create_simulated_cluster

SHAPE = {"nodes": 2, "gpus_per_node": 8, "models": {"h100": 1.0}, "seed": 3}


def test_a_misconfigured_slurm_cluster_still_answers_what_needs_no_connection(monkeypatch):
    monkeypatch.delenv("GPUC_SECRET_TEST_UNSET_JWT", raising=False)
    cluster = Cluster(
        name="hpc",
        kind="slurm",
        connection={"mode": "rest", "restd_url": "http://x"},
        secret_env="GPUC_SECRET_TEST_UNSET_JWT",
    )
    backend = get_backend(cluster)  # never fails: the settings are read on first use
    assert abs(backend.now() - timezone.now()) < timedelta(seconds=5)
    assert backend.workload_logs("train-1", "7").command == "tail -n 200 /var/log/gpu-console/train-1-*.out"
    assert not backend.namespaced and not backend.telemetry_in_process and backend.simulation() is None
    assert backend.service_metrics_url("train-1", {"name": "train-1"}) == ""
    report = backend.test_connection()  # what fleet's test_connection service answered when creating it failed
    assert not report.ok and "GPUC_SECRET_TEST_UNSET_JWT" in report.message
    with pytest.raises(PermanentBackendError, match="GPUC_SECRET_TEST_UNSET_JWT"):
        backend.inventory()


def test_slurm_logs_follow_the_clusters_output_dir():
    backend = get_backend(Cluster(name="hpc", kind="slurm", connection={"output_dir": "/shared/out dir"}))
    assert backend.workload_logs("job", "1").command == "tail -n 200 '/shared/out dir/job'-*.out"


def test_kubernetes_logs_and_metrics_endpoint_are_in_the_workloads_namespace():
    backend = get_backend(Cluster(name="k8s", kind="kubernetes"))
    assert backend.namespaced and not backend.telemetry_in_process and backend.simulation() is None
    assert backend.workload_logs("train-1", "42", "team a").command == (
        "kubectl logs -n 'team a' -l gpu-console/workload=42 --all-containers --prefix --tail=200"
    )
    values = {"name": "serve-1", "service": "serve-1-api", "namespace": "team a", "port": "8000", "cluster": "k8s"}
    assert backend.service_metrics_url("serve-1", values) == "http://serve-1-api.team%20a.svc:8000/metrics"


@pytest.mark.django_db
def test_a_simulated_cluster_has_its_own_clock_telemetry_and_controls():
    cluster = create_simulated_cluster(None, "sim", SHAPE)
    backend = get_backend(cluster)
    simulation = backend.simulation()
    assert simulation is not None and simulation.exists() and backend.telemetry_in_process
    simulation.advance(None, 90)
    assert abs(backend.now() - timezone.now() - timedelta(minutes=90)) < timedelta(seconds=5)
    answers = backend.node_metrics(["gpu-0001", "gpu-0099"])
    assert answers["gpu-0001"].status == 200 and "DCGM_FI_DEV_GPU_UTIL" in answers["gpu-0001"].body
    assert answers["gpu-0099"].status == 404
    assert backend.service_metrics("nothing").status == 404
    assert backend.service_metrics_url("svc", {}) == "/simulator/sim/services/svc/metrics"
    assert backend.workload_logs("never-submitted", "1").lines == []


def test_real_clusters_have_no_telemetry_in_process():
    backend = get_backend(Cluster(name="k8s", kind="kubernetes"))
    with pytest.raises(PermanentBackendError):
        backend.node_metrics(["n1"])
    with pytest.raises(PermanentBackendError):
        backend.service_metrics("svc")
    assert backend.gpu_utilization({}, timezone.now(), timezone.now()) == {}
