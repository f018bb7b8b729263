"""Capacity and fragmentation arithmetic per GPU model."""

import pytest

from apps.fleet.capacity import capacity_by_model
from apps.fleet.models import Cluster, GpuModel, Node


@pytest.fixture
def fleet(db):
    cluster = Cluster.objects.create(name="cap", kind="simulated")
    h100 = GpuModel.objects.get(code="h100")
    a100 = GpuModel.objects.get(code="a100")

    def node(name, model, leaf, allocated=0, unhealthy=0, unschedulable=False, state="ready", count=8):
        return Node.objects.create(
            cluster=cluster,
            name=name,
            gpu_model=model,
            leaf_switch=leaf,
            state=state,
            unschedulable=unschedulable,
            gpu_count=count,
            gpu_allocatable=count - unhealthy,
            gpu_allocated=allocated,
            gpu_unhealthy=unhealthy,
        )

    # H100: leaf-1 has 3 whole free nodes, leaf-2 has 2; plus partly used, cordoned, down and unhealthy ones.
    for i in range(3):
        node(f"h-a{i}", h100, "leaf-1")
    for i in range(2):
        node(f"h-b{i}", h100, "leaf-2")
    node("h-part", h100, "leaf-2", allocated=5)  # 3 stranded
    node("h-sick", h100, "leaf-2", allocated=2, unhealthy=1)  # 5 stranded
    node("h-cordon", h100, "leaf-1", unschedulable=True)
    node("h-down", h100, "leaf-1", state="down")
    node("h-gone", h100, "leaf-1", state="vanished")
    # A100: all partly used: nothing whole.
    node("a-1", a100, "leaf-3", allocated=6)
    node("a-2", a100, "leaf-3", allocated=7)
    return cluster


def test_capacity_per_model(fleet):
    caps = {c.gpu_model: c for c in capacity_by_model(cluster=fleet)}
    h = caps["H100-80GB-HBM3"]
    assert (h.nodes, h.total, h.allocated, h.unhealthy, h.cordoned) == (9, 72, 7, 1, 16)
    assert h.free == 5 * 8 + 3 + 5
    assert (h.whole_free_nodes, h.largest_gang_leaf, h.largest_gang_leaf_switch) == (5, 3, "leaf-1")
    assert h.largest_gang_text == "3 × 8 GPUs within one leaf switch"
    assert h.stranded == 8 and h.fragmentation == round(8 / 48, 3)
    a = caps["A100-SXM4-80GB"]
    assert (a.free, a.whole_free_nodes, a.largest_free_on_one_node) == (3, 0, 2)
    assert a.largest_gang_text == "2 GPUs on one node" and a.fragmentation == 1.0


def test_capacity_api(fleet, personas, api):
    from tests.utils.personas import fresh

    rows = api(fresh(personas.member_a)).get("/api/v1/capacity/?cluster=cap").json()
    h = next(r for r in rows if r["gpu_model"] == "H100-80GB-HBM3")
    assert h["largest_gang_text"] == "3 × 8 GPUs within one leaf switch" and h["free"] == 48
    assert api().get("/api/v1/capacity/").status_code == 401
