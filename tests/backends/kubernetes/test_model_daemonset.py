"""The control-plane model's DaemonSet controller and the kubelet's image pulls, against their documentation (cited in
tests/backends/k8s_fake/daemonset.py and images.py), with hand-written manifests."""

from __future__ import annotations

import pytest

from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.k8s_fake.store import ApiError
from tests.backends.kubernetes.model import condition, create, events, pods

NS = "infra"
BIG = "vllm/vllm-openai:v0.11.0"
PAUSE = "registry.k8s.io/pause:3.10"


def daemon_set(name: str = "prepull", *, selector: dict | None = None, tolerations: list | None = None, **spec) -> dict:
    pod: dict = {
        "initContainers": [{"name": "pull-0", "image": BIG, "command": ["sh", "-c", "true"]}],
        "containers": [{"name": "pause", "image": PAUSE}],
        **({"nodeSelector": selector} if selector else {}),
        **({"tolerations": tolerations} if tolerations else {}),
        **spec,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
        },
    }


@pytest.fixture
def pulling():
    """A cluster whose kubelets take 300 s to pull the engine image (the pause image at once)."""
    server = FakeKubernetes(image_pull_s={BIG: 300}).start()
    server.add_namespace(NS)
    yield server
    server.stop()


def test_one_pod_per_selected_node_that_it_tolerates(fake):
    fake.add_namespace(NS)
    fake.add_node("a1", labels={"pool": "serve"})
    taint = {"key": "dedicated", "value": "serve", "effect": "NoSchedule"}
    fake.add_node("a2", labels={"pool": "serve"}, taints=[taint])
    fake.add_node("a3", labels={"pool": "serve"}, unschedulable=True)
    fake.add_node("b1", labels={"pool": "train"})
    create(fake, daemon_set(selector={"pool": "serve"}))
    placed = {p["spec"]["nodeName"] for p in pods(fake, NS, "prepull-")}
    # a2's taint is not tolerated; a cordoned node still gets its daemon pod (the controller tolerates
    # node.kubernetes.io/unschedulable); b1 is not selected.
    assert placed == {"a1", "a3"}
    pod = next(p for p in pods(fake, NS, "prepull-") if p["spec"]["nodeName"] == "a1")
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    pinned = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a1"]}]}]
    assert terms["nodeSelectorTerms"] == pinned
    assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"][
        "tolerations"
    ]
    ds = fake.get("apps", "v1", "daemonsets", "prepull", NS)
    assert (ds["status"]["desiredNumberScheduled"], ds["status"]["numberReady"]) == (2, 2)


def test_a_tolerated_taint_and_a_new_node_get_pods_and_a_deselected_node_loses_its_pod(fake):
    fake.add_namespace(NS)
    taint = {"key": "dedicated", "value": "serve", "effect": "NoSchedule"}
    fake.add_node("a1", labels={"pool": "serve"}, taints=[taint])
    create(fake, daemon_set(selector={"pool": "serve"}, tolerations=[{"key": "dedicated", "operator": "Exists"}]))
    assert [p["spec"]["nodeName"] for p in pods(fake, NS, "prepull-")] == ["a1"]
    fake.add_node("a2", labels={"pool": "serve"})
    fake.tick()
    assert sorted(p["spec"]["nodeName"] for p in pods(fake, NS, "prepull-")) == ["a1", "a2"]
    with fake.lock:  # the node leaves the pool: its daemon pod goes
        node = fake.store.get(fake.resource("", "v1", "nodes"), "", "a2")
        node["metadata"]["labels"]["pool"] = "other"
        fake.store.put(fake.resource("", "v1", "nodes"), node)
    fake.advance(1)
    deleting = {p["spec"]["nodeName"]: "deletionTimestamp" in p["metadata"] for p in pods(fake, NS, "prepull-")}
    assert deleting == {"a1": False, "a2": True}
    fake.advance(60)  # past the pod's grace period
    assert [p["spec"]["nodeName"] for p in pods(fake, NS, "prepull-")] == ["a1"]


def test_the_api_server_refuses_a_daemon_set_that_is_not_always_restarted_or_whose_selector_misses(fake):
    fake.add_namespace(NS)
    fake.add_node("a1")
    never = daemon_set(restartPolicy="Never")
    with pytest.raises(ApiError) as refused:
        create(fake, never)
    assert refused.value.code == 422 and 'supported values: "Always"' in refused.value.message
    mismatched = daemon_set()
    mismatched["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    with pytest.raises(ApiError) as refused:
        create(fake, mismatched)
    assert "`selector` does not match template `labels`" in refused.value.message
    assert fake.objects("apps", "v1", "daemonsets") == []


def test_a_pod_waits_for_its_image_and_a_node_that_holds_it_starts_at_once(pulling):
    pulling.add_node("cold")
    pulling.add_node("warm", images=[BIG])
    for node in ("cold", "warm"):
        create(
            pulling,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"engine-{node}", "namespace": NS},
                "spec": {"nodeName": node, "containers": [{"name": "engine", "image": BIG}]},
            },
        )
    pulling.tick()
    cold, warm = pods(pulling, NS, "engine-cold")[0], pods(pulling, NS, "engine-warm")[0]
    assert warm["status"]["phase"] == "Running" and condition(warm, "Ready")["status"] == "True"
    assert cold["status"]["phase"] == "Pending"
    assert cold["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert f'Pulling: Pulling image "{BIG}"' in events(pulling, "engine-cold")
    pulling.advance(299)
    assert pods(pulling, NS, "engine-cold")[0]["status"]["phase"] == "Pending"
    pulling.advance(1)
    cold = pods(pulling, NS, "engine-cold")[0]
    assert cold["status"]["phase"] == "Running"
    node = pulling.get("", "v1", "nodes", "cold")
    assert BIG in {name for image in node["status"]["images"] for name in image["names"]}


def test_pulls_on_one_node_are_serial(pulling):
    pulling.add_node("n1")
    other = "lmsysorg/sglang:v0.5.3"
    pulling.control.images.seconds = lambda image: {BIG: 300, other: 200}.get(image, 0)
    for name, image in (("first", BIG), ("second", other)):
        create(
            pulling,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": image}]},
            },
        )
    pulling.advance(300)
    assert [p["status"]["phase"] for p in pods(pulling, NS)] == ["Running", "Pending"]  # first, second
    pulling.advance(200)
    assert [p["status"]["phase"] for p in pods(pulling, NS)] == ["Running", "Running"]


def test_a_pre_pull_daemon_set_leaves_the_image_on_its_nodes(pulling):
    """The single-use DaemonSet pattern: the init container pulls the image, the pause container keeps the pod."""
    pulling.add_node("g1", labels={"pool": "serve"})
    create(pulling, daemon_set(selector={"pool": "serve"}))
    (pod,) = pods(pulling, NS, "prepull-")
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    pulling.advance(300)
    (pod,) = pods(pulling, NS, "prepull-")
    assert pod["status"]["phase"] == "Running" and condition(pod, "Initialized")["status"] == "True"
    assert pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    image_names = {n for image in pulling.get("", "v1", "nodes", "g1")["status"]["images"] for n in image["names"]}
    assert {BIG, PAUSE} <= image_names
