"""The deployment targets through the Kubernetes backend over real HTTP: a cluster whose settings say
`training_target: trainjob` gets Kubeflow Trainer TrainJobs, one with `inference_target: kserve` KServe
InferenceServices; the fake API server's control plane (Kueue, the Trainer, KServe: tests/backends/k8s_fake) admits
and runs them as the real controllers do, and the backend reads their state from their conditions."""

from __future__ import annotations

import pytest

from apps.backends.base import PermanentBackendError
from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.render.workload import WorkloadContext
from apps.backends.types import BackendState, LogSource, WorkloadSpec
from apps.workloads.specs import InferenceServiceSpec
from tests.backends.console_specs import PRODUCT_LABELS, console_spec
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.kubernetes.conftest import make_cluster, push_queue, seed_nodes
from tests.backends.kubernetes.model import create
from tests.backends.kubernetes.test_model_targets import torch_distributed
from tests.backends.kubernetes.test_rbac import DISCOVERY, allowed, needed

TRAINJOBS = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")


@pytest.fixture
def fake():
    server = FakeKubernetes(addons={"kueue", "kserve", "trainer"}).start()
    yield server
    server.stop()


def assert_rbac_grants(fake: FakeKubernetes) -> None:
    grants = allowed()
    for request in fake.requests:
        if request.path in DISCOVERY:
            continue
        for need in needed(request.method, request.path, request.content_type, request.query):
            assert need in grants, f"{request.method} {request.path} needs {need}, which rbac.yaml does not grant"


def test_a_trainjob_is_queued_by_kueue_run_by_the_trainer_and_read_from_its_conditions(db, fake):
    seed_nodes(fake, count=2, gpus=4)
    create(fake, torch_distributed())
    cluster = make_cluster(fake, training_target="trainjob")
    push_queue(cluster, "team-a", "train", ["team-a"], h100=8)
    backend = KubernetesBackend(cluster)
    fake.reset_requests()

    result = backend.submit(console_spec("tj", workers=2, gpus_per_worker=4, command=["sleep", "60"]))
    big = backend.submit(console_spec("tj-big", workers=2, gpus_per_worker=4, command=["sleep", "60"]))

    assert result.backend_id == "tj"
    applied = [r.body for r in fake.requests_to("PATCH") if r.body.get("kind") == "TrainJob"]
    assert applied[0]["spec"]["trainer"]["numNodes"] == 2 and applied[0]["spec"]["runtimeRef"]["name"] == (
        "torch-distributed"
    )
    fake.advance(1)
    status = backend.status(["tj", "tj-big"])
    assert status["tj"].state == BackendState.RUNNING
    assert {p.node for p in status["tj"].placements} == {"gpu-01", "gpu-02"}
    # The second one does not fit the queue's 8 GPUs: suspended, with Kueue's own reason from its Workload.
    assert status["tj-big"].state == BackendState.PENDING
    assert status["tj-big"].reason.startswith("suspended until Kueue admits it (couldn't assign flavors")
    assert big.backend_id == "tj-big"
    fake.advance(60)
    status = backend.status(["tj", "tj-big"])
    assert status["tj"].state == BackendState.SUCCEEDED
    # Metered as any job: its pods, found by their JobSet label, with the TrainJob's tenant and queue.
    usage = [r for r in backend.usage_since(fake.now().replace(year=2000)) if r.backend_id == "tj"]
    assert len(usage) == 2 and {(r.tenant, r.queue, r.gpu_fraction) for r in usage} == {("team-a", "train", 4)}
    assert all((r.end - r.start).total_seconds() == 60 for r in usage)
    assert status["tj-big"].state == BackendState.RUNNING  # the quota came back
    backend.cancel("tj-big")
    fake.advance(60)
    assert fake.get(*TRAINJOBS, "tj-big", "team-a") is None
    assert backend.status(["tj-big"])["tj-big"].state == BackendState.CANCELLED
    assert_rbac_grants(fake)


def test_a_trainjob_naming_a_runtime_the_cluster_lacks_is_refused_by_the_trainers_webhook(db, fake):
    seed_nodes(fake, count=1, gpus=4)
    cluster = make_cluster(fake, training_target="trainjob", trainjob_runtime="torch-nccl")
    push_queue(cluster, "team-a", "train", ["team-a"], h100=8)
    with pytest.raises(PermanentBackendError) as refused:
        KubernetesBackend(cluster).submit(console_spec("tj", gpus_per_worker=1))
    assert "(422)" in str(refused.value)
    assert "specified clusterTrainingRuntime must be created before the TrainJob is created" in str(refused.value)
    assert fake.objects(*TRAINJOBS) == []


def service_context(name: str) -> WorkloadContext:
    return WorkloadContext(
        name=name,
        workload_id="41",
        queue="team-a-serve",
        tier="online-inference",
        preemptible=False,
        gpu_model="h100",
        product_label=PRODUCT_LABELS["h100"],
        namespace="team-a-serve",
    )


def test_an_inference_service_renders_for_the_clusters_target_and_runs_through_kserve(db, fake):
    seed_nodes(fake, count=2, gpus=8)
    cluster = make_cluster(fake, inference_target="kserve")
    push_queue(cluster, "team-a", "serve", ["team-a-serve"], h100=2)
    backend = KubernetesBackend(cluster)
    spec = InferenceServiceSpec(
        name="chat",
        tenant="team-a",
        queue="serve",
        model="meta-llama/Llama-3.1-8B-Instruct",
        gpu_model="h100",
        replicas=3,
    )
    rendered = backend.render(spec, service_context("wl41-chat"))
    assert [o["kind"] for o in rendered.objects] == ["InferenceService", "PodDisruptionBudget"]
    fake.reset_requests()

    backend.submit(WorkloadSpec("wl41-chat", "team-a", "serve", manifest=rendered))
    fake.advance(1)

    # Kueue admits the predictor's pods one by one through its pod integration: 2 of the 3 fit the 2-GPU quota.
    pods = [p for p in fake.objects("", "v1", "pods") if p["metadata"]["name"].startswith("wl41-chat-predictor-")]
    assert len(pods) == 3 and sum(1 for p in pods if p["spec"].get("schedulingGates")) == 1
    status = backend.status(["wl41-chat"])["wl41-chat"]
    assert status.state == BackendState.PENDING  # KServe's Ready waits for the predictor's minimum availability
    assert "couldn't assign flavors" in status.reason and "waiting for Kueue" in status.reason
    assert len(status.placements) == 1  # both admitted pods run on one 8-GPU node

    backend.cancel("wl41-chat")
    fake.advance(200)
    assert backend.status(["wl41-chat"])["wl41-chat"].state == BackendState.CANCELLED
    assert fake.objects("", "v1", "pods") == []
    assert fake.objects("policy", "v1", "poddisruptionbudgets") == []
    assert_rbac_grants(fake)


def test_a_ready_inference_service_runs(db, fake):
    seed_nodes(fake, count=1, gpus=8)
    cluster = make_cluster(fake, inference_target="kserve")
    push_queue(cluster, "team-a", "serve", ["team-a-serve"], h100=8)
    backend = KubernetesBackend(cluster)
    spec = InferenceServiceSpec(
        name="chat", tenant="team-a", queue="serve", model="meta-llama/Llama-3.1-8B-Instruct", gpu_model="h100"
    )
    backend.submit(
        WorkloadSpec("wl41-chat", "team-a", "serve", manifest=backend.render(spec, service_context("wl41-chat")))
    )
    fake.advance(1)
    status = backend.status(["wl41-chat"])["wl41-chat"]
    assert status.state == BackendState.RUNNING and status.placements[0].node == "gpu-01"
    isvc = fake.get("serving.kserve.io", "v1beta1", "inferenceservices", "wl41-chat", "team-a-serve")
    assert isvc["status"]["url"] == "http://wl41-chat-predictor.team-a-serve.svc.cluster.local"


def test_a_cluster_without_kserve_refuses_the_service_before_applying_anything(db):
    fake = FakeKubernetes(addons={"kueue"}).start()
    try:
        seed_nodes(fake, count=1, gpus=8)
        cluster = make_cluster(fake, inference_target="kserve")
        push_queue(cluster, "team-a", "serve", ["team-a-serve"], h100=8)
        backend = KubernetesBackend(cluster)
        spec = InferenceServiceSpec(
            name="chat", tenant="team-a", queue="serve", model="meta-llama/Llama-3.1-8B-Instruct", gpu_model="h100"
        )
        rendered = backend.render(spec, service_context("wl41-chat"))
        fake.reset_requests()
        with pytest.raises(PermanentBackendError, match="needs KServe, which is not installed"):
            backend.submit(WorkloadSpec("wl41-chat", "team-a", "serve", manifest=rendered))
        assert fake.requests_to("PATCH") == []
        report = backend.test_connection()
        assert report.features["kserve"] is False and any("KServe" in note for note in report.notes)
    finally:
        fake.stop()


def test_on_volcano_the_predictor_pods_go_through_their_volcano_queue(db):
    fake = FakeKubernetes(addons={"volcano", "kserve"}).start()
    try:
        seed_nodes(fake, count=1, gpus=8)
        cluster = make_cluster(fake, queueing="volcano", inference_target="kserve")
        push_queue(cluster, "team-a", "serve", ["team-a-serve"], h100=8)
        backend = KubernetesBackend(cluster)
        spec = InferenceServiceSpec(
            name="chat", tenant="team-a", queue="serve", model="meta-llama/Llama-3.1-8B-Instruct", gpu_model="h100"
        )
        rendered = backend.render(spec, service_context("wl41-chat"))
        backend.submit(WorkloadSpec("wl41-chat", "team-a", "serve", manifest=rendered))
        fake.advance(1)
        assert backend.status(["wl41-chat"])["wl41-chat"].state == BackendState.RUNNING
        (pod,) = fake.objects("", "v1", "pods")
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "team-a-serve-h100"
    finally:
        fake.stop()


def test_engine_metrics_of_a_kserve_service_are_read_through_its_predictor_service(db, fake):
    values = {"name": "wl41-chat", "service": "wl41-chat-api", "namespace": "team-a-serve", "port": "8000"}
    kserve = KubernetesBackend(make_cluster(fake, name="ks", inference_target="kserve"))
    plain = KubernetesBackend(make_cluster(fake, name="plain"))
    assert kserve.service_metrics_url("wl41-chat", values) == "http://wl41-chat-predictor.team-a-serve.svc:80/metrics"
    assert plain.service_metrics_url("wl41-chat", values) == "http://wl41-chat-api.team-a-serve.svc:8000/metrics"


def test_a_trainjobs_log_is_streamed_from_its_pods(db, fake):
    seed_nodes(fake, count=1, gpus=4)
    create(fake, torch_distributed())
    cluster = make_cluster(fake, training_target="trainjob")
    push_queue(cluster, "team-a", "train", ["team-a"], h100=8)
    backend = KubernetesBackend(cluster)
    backend.submit(console_spec("tj", gpus_per_worker=4, command=["sleep", "60"]))
    fake.advance(1)
    (pod,) = fake.objects("", "v1", "pods")
    fake.write_log("team-a", pod["metadata"]["name"], "step 1")
    source = LogSource(name="tj", workload_id="tj", workers=1, namespace="team-a")
    assert "step 1" in "".join(backend.stream_logs(source, tail=10, follow=False, worker=None))
