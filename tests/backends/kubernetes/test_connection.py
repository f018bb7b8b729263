"""Connecting: each way of configuring a cluster, and what "Test connection" reports about add-ons."""

from __future__ import annotations

import pytest
import yaml

from apps.backends.base import PermanentBackendError
from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.registry import get_backend
from apps.fleet.models import Cluster
from tests.backends.console_specs import console_spec
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.kubernetes.conftest import bind_queue, make_cluster, seed_nodes


def kubeconfig(url: str, token: str, context: str = "lab") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": url}}],
        "users": [{"name": "console", "user": {"token": token}}],
        "contexts": [
            {"name": context, "context": {"cluster": "lab", "user": "console"}},
            {"name": "other", "context": {"cluster": "lab", "user": "nobody"}},
        ],
        "current-context": "other",
    }


def test_the_registry_builds_the_kubernetes_backend(cluster):
    assert isinstance(get_backend(cluster), KubernetesBackend)


def test_report_with_every_add_on(db, fake):
    seed_nodes(fake, count=2, gpus=8)
    fake.add_node("hami-01", gpus=4, annotations={"hami.io/node-nvidia-register": "GPU-0,10,81920,100,NVIDIA-H100"})
    report = KubernetesBackend(make_cluster(fake)).test_connection()
    assert report.ok and report.server_version == "v1.33.2"
    assert report.features == {"kueue": True, "volcano": True, "lws": True, "keda": True, "hami": True}
    assert report.notes == [
        "HAMi runs on hami-01 but hami_node_labels is not set: HAMi workloads are refused until it names the labels "
        "HAMi's device plugin runs on (its chart's default is gpu=on)"
    ]
    assert report.message == "Kubernetes v1.33.2; add-ons: hami, keda, kueue, lws, volcano; 3 nodes, 20 GPUs"


def test_report_says_what_is_missing(db):
    fake = FakeKubernetes(addons={"volcano"}).start()
    try:
        seed_nodes(fake, count=1)
        report = KubernetesBackend(make_cluster(fake, queueing="kueue")).test_connection()
    finally:
        fake.stop()
    assert report.ok and report.features["volcano"] and not report.features["kueue"]
    assert report.notes[0].startswith("this cluster's queueing is 'kueue' but kueue is not installed")
    assert "missing LeaderWorkerSet: inference replicas that span nodes" in report.notes
    assert "missing KEDA: autoscaling inference on the engines' queue length" in report.notes


@pytest.mark.parametrize(
    ("installed", "queueing", "missing"), [({"kueue"}, "volcano", "Volcano"), ({"volcano"}, "kueue", "Kueue")]
)
def test_submit_refuses_work_whose_queueing_is_not_installed(db, installed, queueing, missing):
    fake = FakeKubernetes(addons=installed).start()
    try:
        seed_nodes(fake, count=1)
        fake.add_namespace("team-a")
        cluster = make_cluster(fake, queueing=queueing)
        bind_queue(cluster, "team-a", "train", ["team-a"])
        spec = console_spec("v1", command=["sleep", "1"])
        with pytest.raises(PermanentBackendError, match=f"needs {missing}, which is not installed"):
            KubernetesBackend(cluster).submit(spec)
        assert fake.requests_to("PATCH") == []
    finally:
        fake.stop()


def test_kubeconfig_in_the_secret_variable_with_a_context(db, monkeypatch):
    fake = FakeKubernetes(token="t0k3n").start()
    try:
        seed_nodes(fake, count=1)
        monkeypatch.setenv("GPUC_SECRET_K8S_LAB_KUBECONFIG", yaml.safe_dump(kubeconfig(fake.url, "t0k3n")))
        cluster = Cluster.objects.create(
            name="lab", kind="kubernetes", connection={"context": "lab"}, secret_env="GPUC_SECRET_K8S_LAB_KUBECONFIG"
        )
        assert KubernetesBackend(cluster).test_connection().ok
        assert fake.requests[-1].headers["authorization"] == "Bearer t0k3n"
    finally:
        fake.stop()


def test_kubeconfig_file_and_context(db, tmp_path):
    fake = FakeKubernetes(token="t0k3n").start()
    try:
        seed_nodes(fake, count=1)
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig(fake.url, "t0k3n", context="prod")))
        cluster = Cluster.objects.create(
            name="prod", kind="kubernetes", connection={"kubeconfig": str(path), "context": "prod"}
        )
        assert len(KubernetesBackend(cluster).inventory().nodes) == 1
        wrong = Cluster.objects.create(
            name="wrong", kind="kubernetes", connection={"kubeconfig": str(path), "context": "nope"}
        )
        with pytest.raises(PermanentBackendError, match="cannot load its connection settings"):
            KubernetesBackend(wrong).inventory()
    finally:
        fake.stop()


def test_no_connection_settings_is_a_clear_permanent_error(db):
    cluster = Cluster.objects.create(name="bare", kind="kubernetes", connection={})
    with pytest.raises(PermanentBackendError, match=r"set one of connection\.in_cluster, connection\.api_url"):
        KubernetesBackend(cluster).inventory()


def test_in_cluster_outside_a_pod_is_a_permanent_error(db, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    cluster = Cluster.objects.create(name="inside", kind="kubernetes", connection={"in_cluster": True})
    with pytest.raises(PermanentBackendError, match="cannot load its connection settings"):
        KubernetesBackend(cluster).inventory()


@pytest.mark.parametrize(
    ("server", "schemas"), [("v1.33.2", "1.33"), ("v1.38.0-gke.1", "1.35"), ("v1.29.4+k3s1", "1.31")]
)
def test_pre_flight_validation_uses_the_server_s_version_within_those_known(db, fake, monkeypatch, server, schemas):
    from tests.backends.k8s_fake import server as fake_server

    monkeypatch.setitem(fake_server.SERVER_VERSION, "gitVersion", server)
    assert KubernetesBackend(make_cluster(fake)).schema_version == schemas


def test_report_says_where_the_gpu_setup_and_the_settings_disagree(db, fake):
    """The nodes' device-plugin setup against the settings that shape the quota objects and the pods."""
    fake.add_node("hami-01", gpus=4, annotations={"hami.io/node-nvidia-register": "GPU-0,10,81920,100,NVIDIA-H100"})
    fake.add_node("gpu-01", gpus=8, resource="nvidia.com/gpu-h100")
    hami = make_cluster(fake, name="k", hami_node_labels={"gpu": "on"})
    assert KubernetesBackend(hami).test_connection().notes == [
        "no node HAMi runs on (hami-01) carries hami_node_labels gpu=on"
    ]
    volcano = KubernetesBackend(make_cluster(fake, name="v", queueing="volcano", volcano_vgpu=True)).test_connection()
    assert volcano.notes == [
        "gpu-01 advertise per-model GPU resources (nvidia.com/gpu-<model>): set volcano_per_model_resources, or the "
        "console's pods, which request nvidia.com/gpu, will not fit them",
        "volcano_vgpu is set but no node advertises volcano.sh/vgpu-number: HAMi workloads would never schedule",
    ]
    renamed = make_cluster(fake, name="r", queueing="volcano", volcano_per_model_resources=True)
    assert KubernetesBackend(renamed).test_connection().notes == []
