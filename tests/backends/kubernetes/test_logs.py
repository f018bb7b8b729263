"""Workload logs on Kubernetes: the fake API server's pod log endpoint as the documentation describes it, and the
backend's `stream_logs` over it (the pods of a gang, one worker, an inference service's leaders, follow).

The endpoint: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#read-log-read-log-of-the-specified-pod
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from urllib.parse import urlsplit

import pytest

from apps.backends.base import LogsNotReady, PermanentBackendError, RetryableBackendError
from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.render.workload import RenderContext, render_kubernetes
from apps.backends.types import LogSource, WorkloadSpec
from tests.backends.console_specs import console_spec
from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.k8s_fake.server import wait_for
from tests.backends.kubernetes.conftest import make_cluster, push_queue, seed_nodes
from tests.backends.kubernetes.test_status import service

NS = "team-a"


def get(fake: FakeKubernetes, path: str) -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP GET to the fake, read whole."""
    url = urlsplit(fake.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def pod(name: str, *, containers=("main",), node="gpu-01", state=None, init=()) -> dict:
    """A pod as the kubelet reports it (no control plane runs in these tests)."""
    state = {"running": {"startedAt": "2026-11-30T10:00:00Z"}} if state is None else state
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            **({"nodeName": node} if node else {}),
            "containers": [{"name": c, "image": "busybox"} for c in containers],
            **({"initContainers": [{"name": c, "image": "busybox"} for c in init]} if init else {}),
        },
        "status": {
            "phase": "Running" if "running" in state else "Pending",
            "containerStatuses": [{"name": c, "ready": "running" in state, "state": state} for c in containers]
            if state
            else [],
        },
    }


@pytest.fixture
def bare():
    """The fake with no controllers: pods stay exactly as seeded."""
    server = FakeKubernetes(control_plane=False).start()
    yield server
    server.stop()


def seed(fake: FakeKubernetes, obj: dict) -> dict:
    if fake.get("", "v1", "namespaces", NS) is None:
        fake.add_namespace(NS)
    return fake.seed("", "v1", "pods", obj)


class TestTheFakesPodLogEndpoint:
    def test_the_log_is_text_and_tail_lines_counts_from_the_end(self, bare):
        seed(bare, pod("p"))
        bare.write_log(NS, "p", "one", "two", "", "four")
        status, headers, body = get(bare, f"/api/v1/namespaces/{NS}/pods/p/log")
        assert status == 200 and headers["content-type"] == "text/plain"
        assert headers["transfer-encoding"] == "chunked"
        assert body == b"one\ntwo\n\nfour\n"
        assert get(bare, f"/api/v1/namespaces/{NS}/pods/p/log?tailLines=2")[2] == b"\nfour\n"
        assert get(bare, f"/api/v1/namespaces/{NS}/pods/p/log?tailLines=0")[2] == b""
        assert get(bare, f"/api/v1/namespaces/{NS}/pods/p/log?tailLines=99")[2] == body

    def test_an_unknown_pod_is_404(self, bare):
        status, _, body = get(bare, f"/api/v1/namespaces/{NS}/pods/nope/log")
        answer = json.loads(body)
        assert status == 404 and answer["reason"] == "NotFound" and answer["message"] == 'pods "nope" not found'

    def test_several_containers_need_one_named(self, bare):
        seed(bare, pod("two", containers=("trainer", "sidecar"), init=("setup",)))
        status, _, body = get(bare, f"/api/v1/namespaces/{NS}/pods/two/log")
        assert status == 400 and json.loads(body)["reason"] == "BadRequest"
        assert json.loads(body)["message"] == (
            "a container name must be specified for pod two, choose one of: [trainer sidecar] "
            "or one of the init containers: [setup]"
        )
        status, _, body = get(bare, f"/api/v1/namespaces/{NS}/pods/two/log?container=nope")
        assert status == 400 and json.loads(body)["message"] == "container nope is not valid for pod two"
        bare.write_log(NS, "two", "from the sidecar", container="sidecar")
        assert get(bare, f"/api/v1/namespaces/{NS}/pods/two/log?container=trainer")[2] == b""
        assert get(bare, f"/api/v1/namespaces/{NS}/pods/two/log?container=sidecar")[2] == b"from the sidecar\n"

    @pytest.mark.parametrize(
        ("reason", "words"),
        [
            ("ContainerCreating", "ContainerCreating"),
            ("PodInitializing", "PodInitializing"),
            ("ErrImagePull", "image can't be pulled"),
            ("ImagePullBackOff", "trying and failing to pull image"),
        ],
    )
    def test_a_container_waiting_to_start_is_refused_in_the_kubelets_words(self, bare, reason, words):
        seed(bare, pod("w", state={"waiting": {"reason": reason}}))
        status, _, body = get(bare, f"/api/v1/namespaces/{NS}/pods/w/log")
        assert status == 400 and json.loads(body)["reason"] == "BadRequest"
        assert json.loads(body)["message"] == f'container "main" in pod "w" is waiting to start: {words}'

    def test_a_pod_not_bound_to_a_node_has_an_empty_log(self, bare):
        seed(bare, pod("unbound", node="", state={}))
        status, _, body = get(bare, f"/api/v1/namespaces/{NS}/pods/unbound/log")
        assert (status, body) == (200, b"")

    def test_a_negative_tail_is_invalid_and_unemulated_options_are_refused(self, bare):
        seed(bare, pod("p"))
        status, _, body = get(bare, f"/api/v1/namespaces/{NS}/pods/p/log?tailLines=-1")
        assert status == 422 and json.loads(body)["reason"] == "Invalid"
        status, _, body = get(bare, f"/api/v1/namespaces/{NS}/pods/p/log?timestamps=true")
        assert status == 400 and "does not emulate" in json.loads(body)["message"]

    def test_follow_sends_lines_as_written_until_the_container_stops(self, fake):
        seed_nodes(fake, count=1, gpus=4)
        fake.add_namespace(NS)
        fake.add_pod("runner", NS, "gpu-01", phase="Pending")
        fake.tick()  # the kubelet starts its container
        fake.write_log(NS, "runner", "before")
        url = urlsplit(fake.url)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        conn.request("GET", f"/api/v1/namespaces/{NS}/pods/runner/log?follow=true&tailLines=1")
        response = conn.getresponse()
        assert response.status == 200
        assert response.readline() == b"before\n"
        fake.write_log(NS, "runner", "after 1", "after 2")
        assert response.readline() == b"after 1\n" and response.readline() == b"after 2\n"
        fake.crash(NS, "runner", 0)  # the program exits: the kubelet stops following
        assert response.read() == b""
        conn.close()

    def test_the_discovery_lists_pods_log_for_get_only(self, bare):
        resources = json.loads(get(bare, "/api/v1")[2])["resources"]
        assert {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]} in (
            resources
        )


#
# The backend
#


@pytest.fixture
def training(db, fake):
    """A two-worker training job running on two nodes (its pods print what the tests write)."""
    seed_nodes(fake, count=2, gpus=4)
    cluster = make_cluster(fake)
    push_queue(cluster, "team-a", "train", [NS], h100=8)
    backend = KubernetesBackend(cluster)
    backend.submit(console_spec("train-x", gpus_per_worker=4, workers=2, command=["python", "train.py"]))
    fake.advance(1)
    pods = {
        p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: p["metadata"]["name"]
        for p in fake.objects("", "v1", "pods")
    }
    assert sorted(pods) == ["0", "1"]
    for index, name in pods.items():
        fake.write_log(NS, name, *(f"rank {index} line {i}" for i in range(5)))
    return backend, {int(k): v for k, v in pods.items()}


SOURCE = LogSource(name="train-x", workload_id="train-x", kind="training", workers=2, namespace=NS)


def test_every_worker_prefixed_one_worker_alone_and_tail(training, fake):
    backend, pods = training
    fake.reset_requests()
    lines = list(backend.stream_logs(SOURCE, tail=2, follow=False, worker=None))
    assert lines == [
        "[worker 0] rank 0 line 3",
        "[worker 0] rank 0 line 4",
        "[worker 1] rank 1 line 3",
        "[worker 1] rank 1 line 4",
    ]
    asked = fake.requests_to("GET", "/log")
    assert [(r.path.rsplit("/", 2)[-2], r.query) for r in asked] == [
        (pods[0], {"container": "trainer", "tailLines": "2"}),
        (pods[1], {"container": "trainer", "tailLines": "2"}),
    ]
    assert list(backend.stream_logs(SOURCE, tail=200, follow=False, worker=1)) == [f"rank 1 line {i}" for i in range(5)]


def test_follow_streams_lines_written_after_the_request_and_ends_when_the_pods_end(training, fake):
    backend, pods = training
    stream = backend.stream_logs(SOURCE, tail=1, follow=True, worker=None, until=time.monotonic() + 30)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(stream), daemon=True)
    reader.start()
    wait_for(lambda: len(got) == 2)
    assert sorted(got) == ["[worker 0] rank 0 line 4", "[worker 1] rank 1 line 4"]
    fake.write_log(NS, pods[1], "epoch 1 done")
    wait_for(lambda: "[worker 1] epoch 1 done" in got)
    fake.crash(NS, pods[0], 0)
    fake.write_log(NS, pods[1], "still going")
    wait_for(lambda: "[worker 1] still going" in got)
    assert reader.is_alive()  # one pod still runs
    fake.crash(NS, pods[1], 0)
    reader.join(timeout=10)
    assert not reader.is_alive()
    follows = fake.requests_to("GET", "/log")
    assert {r.query["follow"] for r in follows} == {"true"}


def test_follow_ends_at_the_limit_while_the_pod_runs_on_and_closing_stops_the_reads(training, fake):
    backend, _ = training
    started = time.monotonic()
    lines = list(backend.stream_logs(SOURCE, tail=0, follow=True, worker=0, until=time.monotonic() + 1))
    assert lines == [] and 0.9 < time.monotonic() - started < 5
    stream = backend.stream_logs(SOURCE, tail=1, follow=True, worker=0, until=time.monotonic() + 60)
    assert next(stream) == "rank 0 line 4"
    started = time.monotonic()
    stream.close()  # the client went away
    assert time.monotonic() - started < 5


def test_a_job_whose_pods_cannot_be_scheduled_is_not_ready(db, fake):
    seed_nodes(fake, count=1, gpus=4)
    cluster = make_cluster(fake)
    push_queue(cluster, "team-a", "train", [NS], h100=8)
    backend = KubernetesBackend(cluster)
    backend.submit(console_spec("too-big", gpus_per_worker=8, command=["python", "train.py"]))
    fake.advance(1)
    source = LogSource(name="too-big", workload_id="too-big", workers=1, namespace=NS)
    with pytest.raises(LogsNotReady, match="is not scheduled yet"):
        backend.stream_logs(source, tail=10, follow=True, worker=None)
    with pytest.raises(LogsNotReady, match="has no pods"):
        backend.stream_logs(
            LogSource(name="never", workload_id="never", namespace=NS), tail=1, follow=False, worker=None
        )


def test_the_api_servers_waiting_refusal_is_not_ready(db, bare):
    """The pod's status may lag the kubelet: the API server's own 400 counts as not ready too."""
    labels = {
        "gpu-console/workload": "w1",
        "batch.kubernetes.io/job-name": "w1",
        "batch.kubernetes.io/job-completion-index": "0",
    }
    seeded = pod("w1-0-abcde", state={"waiting": {"reason": "ContainerCreating"}})
    seeded["metadata"]["labels"] = labels
    seed(bare, seeded)
    backend = KubernetesBackend(make_cluster(bare))
    source = LogSource(name="w1", workload_id="w1", namespace=NS)
    with pytest.raises(
        LogsNotReady, match='container "main" in pod "w1-0-abcde" is waiting to start: ContainerCreating'
    ):
        backend.stream_logs(source, tail=10, follow=False, worker=None)
    # the kubelet answers before the status says it: the API server's refusal is read the same way
    live = bare.get("", "v1", "pods", "w1-0-abcde", NS)
    live["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-11-30T10:00:00Z"}}
    live["status"]["phase"] = "Running"
    bare.store.put(bare.resource("", "v1", "pods"), live)
    bare.fail(400, path="/log", message='container "main" in pod "w1-0-abcde" is waiting to start: PodInitializing')
    with pytest.raises(LogsNotReady, match="PodInitializing"):
        backend.stream_logs(source, tail=10, follow=False, worker=None)
    assert list(backend.stream_logs(source, tail=10, follow=False, worker=None)) == []


def test_an_api_server_that_fails_is_retryable_and_a_refusal_is_not(training, fake):
    backend, _ = training
    fake.fail(503, path="/log")
    with pytest.raises(RetryableBackendError, match="503"):
        backend.stream_logs(SOURCE, tail=10, follow=False, worker=0)
    fake.fail(403, path="/log", message='pods "x" is forbidden: cannot get resource "pods/log"')
    with pytest.raises(PermanentBackendError, match="403 Forbidden"):
        backend.stream_logs(SOURCE, tail=10, follow=True, worker=0)


def test_a_replaced_pod_is_read_not_its_failed_predecessor(db, fake):
    """A Job retries a failed pod with a new one of the same completion index: the newest is the worker's."""
    seed_nodes(fake, count=1, gpus=4)
    cluster = make_cluster(fake)
    push_queue(cluster, "team-a", "train", [NS], h100=8)
    backend = KubernetesBackend(cluster)
    backend.submit(console_spec("retry", gpus_per_worker=1, retries=2, command=["python", "train.py"]))
    fake.advance(1)
    (first,) = fake.objects("", "v1", "pods")
    fake.write_log(NS, first["metadata"]["name"], "attempt 1")
    fake.crash(NS, first["metadata"]["name"], 1)
    fake.advance(1)
    second = next(p for p in fake.objects("", "v1", "pods") if p["status"]["phase"] == "Running")
    fake.write_log(NS, second["metadata"]["name"], "attempt 2")
    source = LogSource(name="retry", workload_id="retry", namespace=NS)
    assert list(backend.stream_logs(source, tail=10, follow=False, worker=None)) == ["attempt 2"]


@pytest.mark.parametrize(("tp", "replicas"), [(1, 2), (16, 2)])
def test_an_inference_service_is_read_from_each_replicas_leader(db, fake, tp, replicas):
    seed_nodes(fake, count=4, gpus=8)
    cluster = make_cluster(fake)
    push_queue(cluster, "team-a", "serve", ["team-a-serve"], h100=64)
    ctx = RenderContext(
        namespace="team-a-serve",
        queue_name="team-a-serve",
        priority_class="online-inference",
        queueing="kueue",
        workload_id="77",
        product_label="NVIDIA-H100-80GB-HBM3",
        name="wl77-chat",
    )
    rendered = render_kubernetes(service("chat", tensor_parallel=tp, replicas=replicas), ctx)
    backend = KubernetesBackend(cluster)
    backend.submit(WorkloadSpec("wl77-chat", "team-a", "serve", manifest=rendered))
    fake.advance(1)
    pods = fake.objects("", "v1", "pods")
    assert len(pods) == replicas * (tp // 8 or 1)
    for p in pods:
        fake.write_log("team-a-serve", p["metadata"]["name"], f"engine on {p['metadata']['name']}")
    source = LogSource(name="wl77-chat", workload_id="77", kind="inference", workers=replicas, namespace="team-a-serve")
    lines = list(backend.stream_logs(source, tail=10, follow=False, worker=None))
    leaders = [
        p["metadata"]["name"]
        for p in pods
        if p["metadata"]["labels"].get("leaderworkerset.sigs.k8s.io/worker-index", "0") == "0"
    ]
    assert len(lines) == replicas and sorted(line.split("engine on ")[1] for line in lines) == sorted(leaders)
    assert [line.split("]")[0] for line in lines] == ["[worker 0", "[worker 1"]
    if tp == 16:  # replica 1 is group 1's leader, not one of its workers
        assert list(backend.stream_logs(source, tail=10, follow=False, worker=1)) == ["engine on wl77-chat-1"]


#
# Through the console: GET /api/v1/workloads/{id}/logs/ of a workload on a Kubernetes cluster
#


@pytest.fixture
def k8s(personas, fake):
    from apps.backends.registry import get_backend
    from apps.fleet.models import GpuModel
    from apps.fleet.services import create_cluster, sync_inventory
    from apps.tenancy import services as tenancy
    from apps.tenancy.desired_state import build_desired_state
    from tests.utils.personas import fresh

    admin = fresh(personas.platform_admin)
    seed_nodes(fake, count=2, gpus=8)
    connection = {"api_url": fake.url, "queueing": "kueue", "logs_url": "https://loki.example/{namespace}/{name}"}
    cluster = create_cluster(admin, name="k8s", kind="kubernetes", connection=connection)
    assert sync_inventory(cluster.pk).ok
    h100 = GpuModel.objects.get(code="h100")
    tenancy.set_guarantee_cap(admin, tenant=personas.a, gpu_model=h100, guaranteed=16)
    train = tenancy.create_queue(admin, tenant=personas.a, name="train")
    tenancy.bind_queue(admin, train, cluster=cluster, namespaces=["a-train"])
    tenancy.set_quota(admin, queue=train, gpu_model=h100, guaranteed=16)
    get_backend(cluster).push_quota(build_desired_state(cluster))
    return cluster


def submitted(api, personas, capture, **spec):
    from apps.workloads.models import Workload
    from tests.utils.personas import fresh
    from tests.workloads.conftest import training_spec

    with capture(execute=True):
        response = api(fresh(personas.member_a)).post(
            "/api/v1/workloads/", {"kind": "training", "spec": training_spec(**spec)}, format="json"
        )
    assert response.status_code == 201, response.json()
    return Workload.objects.get(pk=response.json()["id"])


def test_the_endpoint_streams_a_gangs_pods_and_maps_the_clusters_refusals(
    k8s, fake, personas, api, django_capture_on_commit_callbacks
):
    from apps.workloads import services
    from tests.utils.personas import fresh

    workload = submitted(api, personas, django_capture_on_commit_callbacks, workers=2, gpus_per_worker=8)
    client = api(fresh(personas.member_a))
    url = f"/api/v1/workloads/{workload.pk}/logs/"
    fake.advance(1)
    pods = sorted(fake.objects("", "v1", "pods"), key=lambda p: p["metadata"]["name"])
    assert len(pods) == 2
    for index, p in enumerate(pods):
        fake.write_log("a-train", p["metadata"]["name"], f"hello from rank {index}")
    response = client.get(url)
    assert response.status_code == 200 and response["Content-Type"] == "text/plain; charset=utf-8"
    text = b"".join(response.streaming_content).decode()
    assert text == "[worker 0] hello from rank 0\n[worker 1] hello from rank 1\n"
    assert fake.requests_to("GET", "/log")[0].query == {"container": "trainer", "tailLines": "200"}

    fake.fail(503, path="/log")
    unavailable = client.get(url + "?worker=1")
    assert unavailable.status_code == 503 and unavailable.json()["code"] == "backend_unavailable"
    assert unavailable["Retry-After"] == "30"
    fake.fail(403, path="/log", message='pods "x" is forbidden: cannot get resource "pods/log"')
    refused = client.get(url + "?worker=1")
    assert refused.status_code == 502 and "rbac.yaml" in refused.json()["message"]

    # It ends and its pods go: the log is the cluster's log system's now.
    for p in pods:
        fake.crash("a-train", p["metadata"]["name"], 0)
    fake.advance(1)
    services.reconcile_workloads()
    for p in fake.objects("", "v1", "pods"):
        fake.store.remove(fake.resource("", "v1", "pods"), "a-train", p["metadata"]["name"])
    gone = client.get(url)
    assert gone.status_code == 409, gone.content
    body = gone.json()
    assert body["code"] == "logs_gone"
    assert body["detail"] == {"url": f"https://loki.example/a-train/{workload.backend_name}"}
    assert body["detail"]["url"] in body["message"]


def test_a_workload_whose_pods_wait_is_not_ready_yet(k8s, fake, personas, api, django_capture_on_commit_callbacks):
    from tests.utils.personas import fresh

    for name in ("gpu-01", "gpu-02"):  # nothing fits: its pod stays unscheduled
        cordoned = {**fake.get("", "v1", "nodes", name), "spec": {"unschedulable": True}}
        fake.store.put(fake.resource("", "v1", "nodes"), cordoned)
    workload = submitted(api, personas, django_capture_on_commit_callbacks, workers=1, gpus_per_worker=8)
    fake.advance(1)
    response = api(fresh(personas.member_a)).get(f"/api/v1/workloads/{workload.pk}/logs/?follow=1")
    assert response.status_code == 409, response.content
    assert response.json()["code"] == "logs_not_ready" and response["Retry-After"] == "10"
    assert "is not scheduled yet" in response.json()["message"]
