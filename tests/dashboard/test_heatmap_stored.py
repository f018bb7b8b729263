"""Issue 23: the overview's heatmap from the cells each health cycle stores per cluster (`UtilizationHeatmap`).

The stored cells equal the computed ones; the page shows the same heatmap from them as computed from every node's
health row; and a cluster whose stored cells no longer hold (nodes added, vanished or without GPUs, another number
of nodes to a column, none stored) is computed, in the same single statement."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.dashboard import overview
from apps.fleet.capacity import capacity_by_model
from apps.fleet.models import Cluster, Node
from apps.health import heatmap
from apps.health.models import NodeHealth, UtilizationHeatmap
from tests.dashboard.conftest import GPUS

HOME = reverse("dashboard:home")


def store_all() -> None:
    """What each cluster's health cycle leaves."""
    for cluster in Cluster.objects.all():
        heatmap.store_heatmap(cluster.pk)


def computed() -> dict:
    return overview.utilization_heatmap(Node.objects.all(), capacity_nodes())


def capacity_nodes() -> int:
    return sum(c.nodes for c in capacity_by_model(Node.objects.all()))


def from_stored() -> dict:
    node_sets: dict = {}
    count = sum(c.nodes for c in capacity_by_model(Node.objects.all(), node_sets=node_sets))
    with CaptureQueriesContext(connection) as queries:
        result = overview.utilization_heatmap(Node.objects.all(), count, node_sets)
    assert len(queries.captured_queries) == 1
    return result


def page_heatmap(client, personas) -> dict:
    client.force_login(personas.platform_admin)
    response = client.get(HOME)
    assert response.status_code == 200
    return response.context["overview"]["heatmap"]


def test_the_stored_cells_equal_the_computed_ones(seeded, personas):
    store_all()
    group = heatmap.group_size(capacity_nodes())
    expected: dict[str, list] = {}
    for row in heatmap.computed_rows(Node.objects.all(), group):
        expected.setdefault(row[0], []).append(list(row[1:]))
    stored = {s.cluster.name: s for s in UtilizationHeatmap.objects.select_related("cluster")}
    assert set(stored) == {"c-east", "c-west"}
    for name, cells in expected.items():
        row = stored[name]
        key = lambda cell: (cell[0], -1 if cell[5] is None else cell[5])  # noqa: E731 - column, GPU
        assert sorted(row.cells, key=key) == sorted(cells, key=key), name
        nodes = Node.objects.filter(cluster=row.cluster, gpu_count__gt=0).exclude(state="vanished")
        ids = list(nodes.values_list("id", flat=True))
        fingerprint = (group, len(ids), sum(ids), sum(i * i for i in ids))
        assert (row.group_size, row.nodes, row.id_sum, row.id_sq) == fingerprint


def test_the_page_shows_the_stored_cells_as_computed(seeded, personas, client):
    expected = computed()
    store_all()
    assert from_stored() == expected
    assert page_heatmap(client, personas) == expected
    # It reads them: health rows changed behind the health cycle's back do not show until its next cycle.
    NodeHealth.objects.update(gpu_util={})
    assert not computed()["has_data"]
    assert page_heatmap(client, personas) == expected


def _add_node(cluster: Cluster, name: str, **fields) -> Node:
    first = Node.objects.filter(cluster=cluster).first()
    return Node.objects.create(
        cluster=cluster, name=name, gpu_model=first.gpu_model, pool=first.pool, state="ready", **fields
    )


def _node_added():
    node = _add_node(Cluster.objects.get(name="c-east"), "n005a", gpu_count=GPUS, gpu_allocatable=GPUS)
    NodeHealth.objects.create(node=node, exporter_up=True, gpu_util={"0": 42.0, "3": 7.5})


def _node_vanished():
    Node.objects.filter(cluster__name="c-west", name="n004").update(state="vanished")


def _node_without_gpus():
    Node.objects.filter(cluster__name="c-east", name="n007").update(gpu_count=0)


def _node_replaced():
    # one node goes and another comes: the same number of nodes, other ids
    Node.objects.filter(cluster__name="c-west", name="n011").update(state="vanished")
    _add_node(Cluster.objects.get(name="c-west"), "n012", gpu_count=GPUS, gpu_allocatable=GPUS)


def _fleet_grows_past_a_column():
    # 24 nodes in 12 columns: 2 to a column, the stored cells have 1
    overview.HEATMAP_COLUMNS = 12


def _one_cluster_not_stored():
    UtilizationHeatmap.objects.filter(cluster__name="c-east").delete()


def _cluster_renamed():
    Cluster.objects.filter(name="c-west").update(name="a-west")  # the columns' labels and order follow the name


@pytest.mark.parametrize(
    "change",
    [
        _node_added,
        _node_vanished,
        _node_without_gpus,
        _node_replaced,
        _fleet_grows_past_a_column,
        _one_cluster_not_stored,
        _cluster_renamed,
    ],
)
def test_cells_that_no_longer_hold_are_computed(seeded, personas, client, monkeypatch, change):
    monkeypatch.setattr(overview, "HEATMAP_COLUMNS", overview.HEATMAP_COLUMNS)  # restored after the test
    store_all()
    change()
    expected = computed()
    assert from_stored() == expected
    assert page_heatmap(client, personas) == expected


@pytest.mark.parametrize("columns", [4, 5, 160])
def test_grouped_stored_cells_equal_the_computed_ones(personas, monkeypatch, columns):
    from tests.dashboard.conftest import Seeded, seed_fleet

    seed_fleet(Seeded(), ["big", "alpha"], 10)
    monkeypatch.setattr(heatmap, "HEATMAP_COLUMNS", columns)  # as the health cycle groups
    monkeypatch.setattr(overview, "HEATMAP_COLUMNS", columns)  # and the overview
    Node.objects.filter(name="n003").update(state="vanished")  # before storing: a gap in the names
    expected = computed()
    store_all()
    assert expected["group"] == max(1, -(-18 // columns))
    assert from_stored() == expected
