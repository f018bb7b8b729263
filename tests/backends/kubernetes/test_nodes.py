"""Node operations: the console owns only its own cordons; drains skip DaemonSet and mirror pods."""

from __future__ import annotations

import pytest

from apps.backends.base import PermanentBackendError
from tests.backends.kubernetes.conftest import seed_nodes

DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "dcgm-exporter", "uid": "ds-1", "controller": True}


@pytest.fixture
def nodes(fake):
    return seed_nodes(fake, count=2, gpus=8)


def cordon_by_hand(fake, node: str) -> None:
    with fake.lock:
        stored = fake.store.bucket(fake.resource("", "v1", "nodes"))[("", node)]
        stored["spec"]["unschedulable"] = True
        fake.store.put(fake.resource("", "v1", "nodes"), stored)


def test_the_console_never_uncordons_a_node_someone_else_cordoned(backend, fake, nodes):
    cordon_by_hand(fake, "gpu-01")
    backend.cordon("gpu-01", "xid 79")  # already cordoned by someone else: left as it is, not taken over
    annotations = fake.get("", "v1", "nodes", "gpu-01")["metadata"]["annotations"]
    assert "gpu-console/cordoned-by" not in annotations
    for undo in (backend.uncordon, backend.resume):
        with pytest.raises(PermanentBackendError) as caught:
            undo("gpu-01")
        assert "cordoned outside the console" in str(caught.value) and "gpu-01" in str(caught.value)
    assert fake.get("", "v1", "nodes", "gpu-01")["spec"]["unschedulable"] is True
    assert fake.requests_to("PATCH") == []


def test_uncordon_of_a_schedulable_node_changes_nothing(backend, fake, nodes):
    backend.uncordon("gpu-01")
    assert fake.requests_to("PATCH") == []


def test_cordon_then_resume_round_trip_leaves_no_annotations(backend, fake, nodes):
    backend.cordon("gpu-02", "fan failure", by="oncall@example.com")
    node = fake.get("", "v1", "nodes", "gpu-02")
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"]["gpu-console/cordoned-by"] == "oncall@example.com"
    info = next(n for n in backend.inventory().nodes if n.name == "gpu-02")
    assert info.unschedulable and info.state_reason == "cordoned by oncall@example.com: fan failure"
    backend.resume("gpu-02")
    node = fake.get("", "v1", "nodes", "gpu-02")
    assert node["spec"]["unschedulable"] is False
    assert not any(k.startswith("gpu-console/") for k in node["metadata"]["annotations"])


def test_drain_evicts_workload_pods_only(backend, fake, nodes):
    fake.add_namespace("team-a")
    fake.add_namespace("kube-system")
    console = {"app.kubernetes.io/managed-by": "gpu-console", "job-name": "train-1"}
    fake.add_pod("train-1-0-x", "team-a", "gpu-01", gpus=4, labels=console)
    fake.add_pod("train-1-1-y", "team-a", "gpu-01", gpus=4, labels=console)
    fake.add_pod("dcgm-exporter-abc", "kube-system", "gpu-01", owner=DAEMONSET)
    fake.add_pod("kube-proxy-gpu-01", "kube-system", "gpu-01", annotations={"kubernetes.io/config.mirror": "abc"})
    fake.add_pod("done-0", "team-a", "gpu-01", phase="Succeeded")
    fake.add_pod("elsewhere", "team-a", "gpu-02", gpus=1)
    result = backend.drain("gpu-01", "rma")
    assert result.node == "gpu-01" and result.evicted == ["train-1"] and result.blocked == {}
    assert sorted(result.skipped) == [
        "kube-system/dcgm-exporter-abc: DaemonSet pod",
        "kube-system/kube-proxy-gpu-01: mirror (static) pod",
    ]
    evicted = sorted(r.path.split("/")[-2] for r in fake.requests_to("POST"))
    assert evicted == ["train-1-0-x", "train-1-1-y"]
    assert fake.get("", "v1", "nodes", "gpu-01")["spec"]["unschedulable"] is True


def test_drain_of_a_node_someone_else_cordoned_evicts_but_keeps_their_cordon(backend, fake, nodes):
    cordon_by_hand(fake, "gpu-01")
    fake.add_namespace("web")
    fake.add_pod("web-0", "web", "gpu-01", gpus=1)
    messages = []
    result = backend.drain("gpu-01", "x", progress=lambda message, percent: messages.append(message))
    assert result.evicted == ["web/web-0"]
    assert messages[0] == "gpu-01 was already cordoned outside the console"
    assert "gpu-console/cordoned-by" not in fake.get("", "v1", "nodes", "gpu-01")["metadata"]["annotations"]
