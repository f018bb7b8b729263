"""The minute's accumulator, appended to by PostgreSQL and read when the minute turns: over ten scrapes with faults
(an exporter down across a minute's end, a hot GPU, a GPU off the bus, a node down), every rollup row is the minimum,
mean and maximum of exactly the readings its minute's scrapes stored, and nothing else is rolled up."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.backends.simulator.models import SimFault
from apps.backends.simulator.services import clear_fault
from apps.fleet.models import Node
from apps.health.ingest import run_cycle
from apps.health.models import Incident, NodeHealth, NodeRollup
from apps.health.rules import FOLDED_METRICS
from tests.health.conftest import inject

pytestmark = pytest.mark.django_db

FAULTS = {  # scrape number: what happens before it
    2: [("inject", "gpu-0002", "exporter-down", None)],
    3: [("inject", "gpu-0003", "thermal", 1)],
    6: [("clear", "gpu-0002", "exporter-down", None), ("inject", "gpu-0004", "xid79", 2)],
    8: [("inject", "gpu-0001", "node-down", None)],
}


def expected_rollups(readings: dict[tuple[str, object], list[dict]], last_up: dict[str, object]) -> dict:
    """{(node, minute): data} for every minute followed by a later scrape of its node that answered."""
    out = {}
    for (node, minute), scrapes in readings.items():
        if last_up[node] <= minute:
            continue  # the node's accumulator still holds this minute
        cells: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for gpus in scrapes:
            for index, gpu in gpus.items():
                cells[index]  # a GPU that reported none of the folded metrics still has its (empty) entry
                for metric in FOLDED_METRICS:
                    if gpu["v"].get(metric) is not None:
                        cells[index][metric].append(gpu["v"][metric])
        out[(node, minute)] = {
            index: {m: [min(v), round(sum(v) / len(v), 4), max(v)] for m, v in per.items()}
            for index, per in cells.items()
        }
    return out


def test_rollups_hold_exactly_the_readings_of_their_minute(fleet, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=5)
    readings: dict[tuple[str, object], list[dict]] = defaultdict(list)
    last_up: dict[str, object] = {}
    for scrape in range(10):
        for what, node, kind, gpu in FAULTS.get(scrape, []):
            if what == "inject":
                inject(cluster, node, kind, gpu)
            else:
                clear_fault(None, SimFault.objects.get(node=node, kind=kind, cleared_at__isnull=True))
        at = start + timedelta(seconds=5 + 15 * scrape)
        with django_capture_on_commit_callbacks(execute=True):  # the cordon's operation runs
            assert not run_cycle(cluster.pk, at).skipped
        for name, gpus in NodeHealth.objects.filter(node__cluster=cluster, scraped_at=at).values_list(
            "node__name", "gpus"
        ):
            readings[(name, at.replace(second=0))].append(gpus)
            last_up[name] = at.replace(second=0)
    rollups = {(r.node.name, r.minute): r.data for r in NodeRollup.objects.select_related("node")}
    assert rollups == expected_rollups(readings, last_up)
    # what the scenario must have exercised: a minute rolled up after an exporter came back, a GPU gone missing
    assert ("gpu-0002", start) in rollups and len(readings[("gpu-0002", start)]) == 2
    assert len(rollups) == 4 * 2 - 1  # minutes 0 and 1 of every node, but node 1's minute 1 waits for it to answer
    assert {"exporter-down", "thermal", "xid-79"} <= set(Incident.objects.values_list("cause", flat=True))
    assert Node.objects.get(cluster=cluster, name="gpu-0004").unschedulable
