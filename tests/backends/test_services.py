"""Simulator services: permissions by persona, one audit event each, NotFound and InvalidInput naming the input."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.backends.models import SimCluster, SimFault
from apps.backends.simulator.services import advance_time, clear_fault, inject_fault
from apps.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from apps.fleet.models import Cluster
from apps.fleet.services import create_simulated_cluster
from tests.utils.personas import fresh

SHAPE = {"nodes": 4, "gpus_per_node": 8, "models": {"h100": 0.5, "l40s": 0.5}, "seed": 3}


@pytest.fixture
def sim(personas):
    return create_simulated_cluster(fresh(personas.platform_admin), "sim", SHAPE)


def events_since(last_id: int):
    return list(AuditEvent.objects.filter(id__gt=last_id).order_by("id"))


def last_event_id() -> int:
    return AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


def test_platform_admin_creates_a_simulated_cluster_with_one_event(personas):
    before = last_event_id()
    cluster = create_simulated_cluster(fresh(personas.platform_admin), "demo", SHAPE, description="demo fleet")
    assert cluster.kind == "simulated" and cluster.connection == {
        **SHAPE,
        "nodes_per_rack": 8,
        "racks_per_leaf": 4,
        "hostname_label": "Hostname",
    }
    assert SimCluster.objects.get(cluster=cluster).seed == 3
    [event] = events_since(before)
    assert (event.action, event.actor_label, event.target_label) == ("cluster.create", "root", "demo")
    assert "4 nodes × 8 GPUs" in event.reason


@pytest.mark.parametrize("who", ["oncall", "tenant_admin_a", "member_a", "viewer_a"])
def test_only_platform_admins_create_clusters(personas, who):
    before = last_event_id()
    with pytest.raises(Forbidden):
        create_simulated_cluster(fresh(personas.user(who)), "nope", SHAPE)
    assert not Cluster.objects.filter(name="nope").exists()
    assert events_since(before) == []


@pytest.mark.parametrize(
    ("changes", "field", "text"),
    [
        ({"nodes": 0}, "nodes", "positive"),
        ({"models": {"x100": 1.0}}, "models", "unknown model 'x100'; known: a100, h100"),
        ({"models": {"h100": 0.5, "l40s": 0.4}}, "models", "sum to 1"),
        ({"gpus_per_node": 32}, "gpus_per_node", "between 1 and 16"),
        ({"hostname_lable": "x"}, "hostname_lable", "unknown shape field"),
    ],
)
def test_invalid_shape_names_the_field(personas, changes, field, text):
    with pytest.raises(InvalidInput) as caught:
        create_simulated_cluster(fresh(personas.platform_admin), "bad", {**SHAPE, **changes})
    assert text in caught.value.fields[field][0]
    assert not Cluster.objects.filter(name="bad").exists()


def test_invalid_or_taken_name(personas, sim):
    with pytest.raises(InvalidInput) as caught:
        create_simulated_cluster(fresh(personas.platform_admin), "Bad_Name", SHAPE)
    assert "name" in caught.value.fields
    with pytest.raises(Conflict) as caught:
        create_simulated_cluster(fresh(personas.platform_admin), "sim", SHAPE)
    assert caught.value.fields == {"name": ["Already taken."]}


@pytest.mark.parametrize("who", ["oncall", "platform_admin"])
def test_operators_inject_and_clear_faults_with_one_event_each(personas, sim, who):
    actor = fresh(personas.user(who))
    before = last_event_id()
    fault = inject_fault(actor, sim, "gpu-0002", "xid79", 5, reason="drill")
    [event] = events_since(before)
    assert event.action == "simulator.fault.inject" and event.reason == "drill"
    assert event.target_label == "sim: xid79 on gpu-0002/gpu5"
    assert event.after["effect"] == "GPU fell off the bus (XID 79)"
    before = last_event_id()
    clear_fault(fresh(personas.user(who)), fault, reason="reseated")
    [event] = events_since(before)
    assert event.action == "simulator.fault.clear" and event.before == {"active": True}
    assert SimFault.objects.get(pk=fault.pk).cleared_at is not None


@pytest.mark.parametrize("who", ["tenant_admin_a", "member_a", "viewer_a", "ci_a"])
def test_tenant_personas_may_not_inject_clear_or_advance(personas, sim, who):
    fault = inject_fault(None, sim, "gpu-0001", "thermal", 0)
    before = last_event_id()
    with pytest.raises(Forbidden):
        inject_fault(fresh(personas.user(who)), sim, "gpu-0001", "xid79", 0)
    with pytest.raises(Forbidden):
        clear_fault(fresh(personas.user(who)), fault)
    with pytest.raises(Forbidden):
        advance_time(fresh(personas.user(who)), sim, 5)
    assert events_since(before) == []


def test_unknown_node_or_gpu_is_not_found_naming_it(personas, sim):
    oncall = fresh(personas.oncall)
    with pytest.raises(NotFound) as caught:
        inject_fault(oncall, sim, "gpu-0042", "xid79", 0)
    assert "gpu-0042" in caught.value.message and "node" in caught.value.fields
    with pytest.raises(NotFound) as caught:
        inject_fault(oncall, sim, "gpu-0001", "xid79", 8)
    assert caught.value.fields["gpu"] == ["No GPU 8 on node gpu-0001 (it has 8: 0 to 7)."]


def test_bad_kind_gpu_for_node_fault_duplicates_and_double_clear(personas, sim):
    oncall = fresh(personas.oncall)
    with pytest.raises(InvalidInput) as caught:
        inject_fault(oncall, sim, "gpu-0001", "meteor")
    assert "known: xid79, xid48" in caught.value.fields["kind"][0]
    with pytest.raises(InvalidInput) as caught:
        inject_fault(oncall, sim, "gpu-0001", "node-down", 2)
    assert "gpu" in caught.value.fields
    fault = inject_fault(oncall, sim, "gpu-0001", "nvlink", 1)
    before = last_event_id()
    with pytest.raises(Conflict):
        inject_fault(oncall, sim, "gpu-0001", "nvlink", 1)
    clear_fault(oncall, fault)
    with pytest.raises(Conflict):
        clear_fault(oncall, SimFault.objects.get(pk=fault.pk))
    assert [e.action for e in events_since(before)] == ["simulator.fault.clear"]


def test_advance_time(personas, sim):
    before = last_event_id()
    cluster_sim = advance_time(fresh(personas.oncall), sim, 90)
    assert cluster_sim.clock_offset_s == 5400
    [event] = events_since(before)
    assert event.action == "simulator.time.advance" and event.target_label == "sim"
    for bad in (0, -5, 10**9, float("nan"), "10"):
        with pytest.raises(InvalidInput) as caught:
            advance_time(fresh(personas.oncall), sim, bad)
        assert "minutes" in caught.value.fields


def test_system_actor_is_recorded_as_system(db):
    before = last_event_id()
    cluster = create_simulated_cluster(None, "cli", SHAPE)
    inject_fault(None, cluster, "gpu-0001", "exporter-down")
    assert [e.actor_label for e in events_since(before)] == ["system", "system"]


def test_services_refuse_non_simulated_clusters(personas):
    real = Cluster.objects.create(name="k8s", kind="kubernetes")
    with pytest.raises(InvalidInput) as caught:
        inject_fault(fresh(personas.oncall), real, "gpu-0001", "xid79", 0)
    assert "not a simulated one" in caught.value.message
