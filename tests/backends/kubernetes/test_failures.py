"""Failure paths: each API answer or transport failure becomes the right retryable or permanent error,
with a message that says what was being done and what to check."""

from __future__ import annotations

import pytest

from apps.backends.base import NotFoundError, PermanentBackendError, RetryableBackendError
from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.types import Taint
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.kubernetes.conftest import make_cluster, seed_nodes


@pytest.fixture
def nodes(fake):
    return seed_nodes(fake, count=2, gpus=8)


def test_401_is_permanent_and_points_at_the_secret(db, monkeypatch):
    fake = FakeKubernetes(token="right-token").start()
    try:
        seed_nodes(fake, count=1)
        cluster = make_cluster(fake)
        cluster.secret_env = "GPUC_SECRET_K8S_TEST_TOKEN"
        monkeypatch.setenv("GPUC_SECRET_K8S_TEST_TOKEN", "wrong-token")
        with pytest.raises(PermanentBackendError) as caught:
            KubernetesBackend(cluster).inventory()
        assert "401 Unauthorized" in str(caught.value) and "secret_env" in str(caught.value)
        assert not caught.value.retryable
        monkeypatch.setenv("GPUC_SECRET_K8S_TEST_TOKEN", "right-token")
        assert len(KubernetesBackend(cluster).inventory().nodes) == 1
        assert fake.requests[-1].headers["authorization"] == "Bearer right-token"
    finally:
        fake.stop()


def test_403_is_permanent_and_names_the_rbac_manifest(backend, fake, nodes):
    message = 'nodes is forbidden: User "system:serviceaccount:gpu-console:gpu-console" cannot list resource "nodes"'
    fake.fail(403, path="/api/v1/nodes", message=message)
    with pytest.raises(PermanentBackendError) as caught:
        backend.inventory()
    text = str(caught.value)
    assert "403 Forbidden" in text and message in text and "deploy/kubernetes/base/rbac.yaml" in text
    assert "cluster k8s: list nodes" in text


@pytest.mark.parametrize(
    "operation",
    [
        lambda b: b.cordon("gpu-99", "x"),
        lambda b: b.uncordon("gpu-99"),
        lambda b: b.taint("gpu-99", Taint("k", "v")),
        lambda b: b.drain("gpu-99", "x"),
    ],
    ids=["cordon", "uncordon", "taint", "drain"],
)
def test_404_unknown_node_is_not_found(backend, nodes, operation):
    with pytest.raises(NotFoundError) as caught:
        operation(backend)
    assert "node 'gpu-99' does not exist" in str(caught.value) and not caught.value.retryable


def test_409_on_taint_rereads_and_retries(backend, fake, nodes):
    # Someone else changes the node between our read and our write: the API server answers a real 409.
    ops = backend.node_ops
    read = ops.read
    calls = []

    def read_then_someone_writes(node):
        live = read(node)
        if not calls:
            with fake.lock:
                stored = fake.store.bucket(fake.resource("", "v1", "nodes"))[("", node)]
                stored["metadata"]["labels"]["touched"] = "yes"
                fake.store.put(fake.resource("", "v1", "nodes"), stored)
        calls.append(node)
        return live

    ops.read = read_then_someone_writes
    backend.taint("gpu-01", Taint("gpu-console/xid", "79", "NoSchedule"))
    patches = fake.requests_to("PATCH")
    assert len(patches) == 2 and len(calls) == 2
    node = fake.get("", "v1", "nodes", "gpu-01")
    assert node["spec"]["taints"] == [{"key": "gpu-console/xid", "effect": "NoSchedule", "value": "79"}]
    assert node["metadata"]["labels"]["touched"] == "yes"  # the other writer's change survived


def test_409_that_keeps_happening_is_retryable(backend, fake, nodes):
    fake.fail(409, times=5, method="PATCH", message="the object has been modified")
    with pytest.raises(RetryableBackendError) as caught:
        backend.taint("gpu-01", Taint("k", "v"))
    assert "5 conflicts in a row" in str(caught.value)


def test_409_already_exists_is_permanent_but_a_stale_version_is_retryable(backend, fake, nodes):
    from apps.backends.base import BackendError

    fake.fail(409, method="POST", reason="AlreadyExists", message='namespaces "x" already exists')
    with pytest.raises(BackendError) as caught:
        backend.api.request("POST", "/api/v1/namespaces", "create namespace x", body={"metadata": {"name": "x"}})
    assert not caught.value.retryable and 'conflict (409): namespaces "x" already exists' in str(caught.value)
    fake.fail(409, method="PATCH", message="the object has been modified")
    with pytest.raises(BackendError) as caught:
        backend.api.request(
            "PATCH", "/api/v1/nodes/gpu-01", "label node", body={}, content_type="application/merge-patch+json"
        )
    assert caught.value.retryable


def test_429_from_a_disruption_budget_is_retried_then_reported(backend, fake, nodes):
    fake.add_namespace("serve")
    labels = {"app": "vllm"}
    for i in range(2):
        fake.add_pod(f"vllm-{i}", "serve", "gpu-01", gpus=4, labels=labels)
    fake.seed(
        "policy",
        "v1",
        "poddisruptionbudgets",
        {
            "metadata": {"name": "vllm-pdb", "namespace": "serve"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": labels}},
        },
    )
    clock = [0.0]
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        clock[0] += seconds

    backend.node_ops.sleep = sleep
    backend.node_ops.clock = lambda: clock[0]
    backend.node_ops.drain_settings = backend.node_ops.drain_settings.__class__(timeout_s=20)
    result = backend.drain("gpu-01", "rma")
    assert result.evicted == []
    assert set(result.blocked) == {"serve/vllm-0", "serve/vllm-1"}
    assert result.blocked["serve/vllm-0"] == "The disruption budget vllm-pdb needs 2 healthy pods and has 2 currently"
    assert sleeps == [1.0, 2.0, 4.0, 8.0]  # backoff until the next wait would pass the 20 s timeout
    assert len(fake.requests_to("POST")) == 2 * (len(sleeps) + 1)
    assert fake.get("", "v1", "nodes", "gpu-01")["spec"]["unschedulable"] is True


def test_a_budget_that_frees_up_lets_the_drain_finish(backend, fake, nodes):
    fake.add_namespace("serve")
    labels = {"app": "vllm"}
    for i in range(2):
        fake.add_pod(f"vllm-{i}", "serve", "gpu-01", gpus=4, labels=labels)
    pdb = {
        "metadata": {"name": "vllm-pdb", "namespace": "serve"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": labels}},
    }
    fake.seed("policy", "v1", "poddisruptionbudgets", pdb)
    messages = []

    def operator_relaxes_the_budget(seconds):
        with fake.lock:
            budget = fake.store.bucket(fake.resource("policy", "v1", "poddisruptionbudgets"))[("serve", "vllm-pdb")]
            budget["spec"]["maxUnavailable"] = 2

    backend.node_ops.sleep = operator_relaxes_the_budget
    result = backend.drain("gpu-01", "rma", progress=lambda message, percent: messages.append((message, percent)))
    assert result.blocked == {} and result.evicted == ["serve/vllm-0", "serve/vllm-1"]
    assert messages[0] == ("cordoned gpu-01", 0.0)
    assert ("evicted serve/vllm-1", 100.0) in messages


def test_500_is_retryable(backend, fake, nodes):
    fake.fail(500, path="/api/v1/pods", message="etcdserver: request timed out")
    with pytest.raises(RetryableBackendError) as caught:
        backend.inventory()
    assert "the API server failed (500): etcdserver: request timed out" in str(caught.value)


def test_429_throttling_is_retryable(backend, fake, nodes):
    fake.fail(429, path="/api/v1/nodes", message="Too many requests, please try again later.")
    with pytest.raises(RetryableBackendError, match="429"):
        backend.inventory()


def test_422_on_apply_is_permanent(db, fake, nodes):
    from tests.backends.console_specs import console_spec
    from tests.backends.kubernetes.conftest import bind_queue

    fake.add_namespace("team-a")
    cluster = make_cluster(fake)
    bind_queue(cluster, "team-a", "train", ["team-a"])
    fake.fail(422, method="PATCH", message='Job.batch "x" is invalid: spec.template: Invalid value')
    spec = console_spec("x", command=["sleep", "1"])
    with pytest.raises(PermanentBackendError, match="refused the request \\(422\\)"):
        KubernetesBackend(cluster).submit(spec)


def test_timeout_is_retryable(db, fake, nodes):
    cluster = make_cluster(fake, request_timeout_s=0.3)
    fake.hang(5, path="/api/v1/nodes")
    with pytest.raises(RetryableBackendError) as caught:
        KubernetesBackend(cluster).inventory()
    assert "did not answer in time" in str(caught.value)


def test_connection_refused_is_retryable(db, fake, nodes):
    cluster = make_cluster(fake)
    fake.stop()
    with pytest.raises(RetryableBackendError) as caught:
        KubernetesBackend(cluster).inventory()
    assert "cannot reach the API server" in str(caught.value) and "Connection refused" in str(caught.value)


def test_a_missing_secret_variable_is_permanent(db, fake, monkeypatch):
    cluster = make_cluster(fake)
    cluster.secret_env = "GPUC_SECRET_K8S_NOT_SET"
    monkeypatch.delenv("GPUC_SECRET_K8S_NOT_SET", raising=False)
    with pytest.raises(PermanentBackendError, match="GPUC_SECRET_K8S_NOT_SET"):
        KubernetesBackend(cluster).inventory()
