"""Ingestion cycles on real parts: the simulator in process, real HTTP exporters and a Prometheus-shaped server."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.backends.simulator.services import clear_fault
from apps.fleet.models import Gpu, Node
from apps.health.ingest import run_cycle
from apps.health.models import Incident, NodeHealth, NodeRollup, SourceKind, TelemetrySource
from apps.health.services.housekeeping import prune_rollups
from tests.health.conftest import cycle, inject
from tests.health.http_helpers import serve

pytestmark = pytest.mark.django_db


def test_a_healthy_fleet_stores_latest_values_and_opens_nothing(fleet):
    result = cycle(fleet["cluster"])
    assert (result.nodes, result.unreachable, result.samples, result.findings) == (4, 0, 864, 0)  # 27 series x 32 GPUs
    health = NodeHealth.objects.get(node__name="gpu-0001")
    assert health.status == "ok" and health.exporter_up and len(health.gpus) == 8
    gpu = health.gpus["0"]
    assert gpu["uuid"] == Gpu.objects.get(node__name="gpu-0001", index=0).uuid
    assert {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"} <= set(gpu["v"])
    assert "DCGM_FI_DEV_MEM_CLOCK" not in gpu["v"]  # only what rules and pages read is kept
    assert Incident.objects.count() == 0
    source = TelemetrySource.objects.get(cluster=fleet["cluster"])
    assert source.kind == SourceKind.SIMULATOR and source.last_nodes == 4 and source.last_samples == 864


def test_minute_rollups_and_pruning(fleet):
    cluster = fleet["cluster"]
    at = timezone.now().replace(second=5, microsecond=0)
    temperatures = []
    for step in range(2):
        run_cycle(cluster.pk, at + timedelta(seconds=15 * step))
        temperatures.append(NodeHealth.objects.get(node__name="gpu-0001").gpus["0"]["v"]["DCGM_FI_DEV_GPU_TEMP"])
    health = NodeHealth.objects.get(node__name="gpu-0001")
    assert len(health.acc) == 2 and NodeRollup.objects.count() == 0  # two scrapes appended to this minute
    run_cycle(cluster.pk, at + timedelta(seconds=60))  # the minute turns
    rollup = NodeRollup.objects.get(node__name="gpu-0001")
    mean = round(sum(temperatures) / 2, 4)
    assert rollup.minute == at.replace(second=0) and NodeRollup.objects.count() == 4
    assert rollup.data["0"]["DCGM_FI_DEV_GPU_TEMP"] == [min(temperatures), mean, max(temperatures)]
    assert len(NodeHealth.objects.get(node__name="gpu-0001").acc) == 1  # the new minute's first scrape
    NodeRollup.objects.update(minute=timezone.now() - timedelta(days=31))
    assert prune_rollups() == 4 and NodeRollup.objects.count() == 0
    assert AuditEvent.objects.filter(action="health.rollups.prune").count() == 1


def test_exporter_down_marks_the_node_suspect_not_failed(fleet):
    cluster = fleet["cluster"]
    cycle(cluster)
    inject(cluster, "gpu-0002", "exporter-down")
    result = cycle(cluster)
    health = NodeHealth.objects.get(node__name="gpu-0002")
    assert result.unreachable == 1 and health.status == "suspect" and not health.exporter_up
    assert health.gpus  # the last readings stay visible
    assert Node.objects.get(name="gpu-0002").state == "ready" and Incident.objects.count() == 0
    cycle(cluster)  # second miss: the exporter-down rule fires (warning, alert: no isolation)
    incident = Incident.objects.get(cause="exporter-down")
    assert incident.severity == "warning" and incident.state == "detected"
    assert "did not answer 2 scrapes in a row" in incident.evidence[0]["text"]
    assert not Node.objects.get(name="gpu-0002").unschedulable


def test_findings_deduplicate_into_one_incident_per_node_and_cause(fleet):
    cluster = fleet["cluster"]
    cycle(cluster)
    inject(cluster, "gpu-0003", "thermal", 1)
    cycle(cluster)
    cycle(cluster)
    inject(cluster, "gpu-0003", "thermal", 2)
    cycle(cluster)  # a new GPU with the same cause: the same incident, one more occurrence
    incident = Incident.objects.get()
    assert incident.cause == "thermal" and incident.severity == "warning"
    assert [g["index"] for g in incident.gpus] == [1, 2] and incident.occurrences == 2
    assert NodeHealth.objects.get(node__name="gpu-0003").status == "warning"


def test_gpu_missing_from_the_exporter(fleet):
    cluster = fleet["cluster"]
    Gpu.objects.create(node=Node.objects.get(name="gpu-0004"), index=8, uuid="GPU-ghost")
    cycle(cluster)
    incident = Incident.objects.get(cause="gpu-missing")
    assert "GPU 8 (UUID GPU-ghost) is in the inventory of node gpu-0004 but missing" in incident.evidence[0]["text"]


EXPORTER = (
    "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
    "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
    'DCGM_FI_DEV_XID_ERRORS{{gpu="0",UUID="GPU-{node}-0",hostname="{node}"}} {xid}\n'
    'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="GPU-{node}-0",hostname="{node}"}} 40\n'
)


def test_http_exporters_with_a_url_pattern(fleet):
    cluster = fleet["cluster"]
    names = [n.name for n in fleet["nodes"]]
    routes = {f"/{cluster.name}/{name}/metrics": (200, EXPORTER.format(node=name, xid=0)) for name in names}
    routes[f"/{cluster.name}/gpu-0002/metrics"] = (200, EXPORTER.format(node="gpu-0002", xid=0) + "broken {{\nxx\n")
    routes[f"/{cluster.name}/gpu-0003/metrics"] = (500, "exporter crashed\n")
    del routes[f"/{cluster.name}/gpu-0004/metrics"]
    with serve(routes) as server:
        TelemetrySource.objects.create(
            cluster=cluster, kind=SourceKind.EXPORTER, url_pattern=server.url + "/{cluster}/{node}/metrics"
        )
        result = run_cycle(cluster.pk)
    assert (result.nodes, result.unreachable, result.malformed) == (4, 2, 2)
    source = TelemetrySource.objects.get(cluster=cluster)
    assert source.last_malformed == 2 and source.malformed_by_node["gpu-0002"][0] == 2
    assert "HTTP 500" in source.last_error and "HTTP 404" in source.last_error
    statuses = dict(NodeHealth.objects.values_list("node__name", "status"))
    assert statuses["gpu-0003"] == statuses["gpu-0004"] == "suspect"
    assert NodeHealth.objects.get(node__name="gpu-0002").gpus["0"]["v"]["DCGM_FI_DEV_GPU_TEMP"] == 40


def test_prometheus_source(fleet):
    cluster = fleet["cluster"]
    series = [
        {
            "metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", "gpu": "2", "UUID": "GPU-p", "Hostname": name},
            "value": [1700000000, "48" if name == "gpu-0001" else "0"],
        }
        for name in ("gpu-0001", "gpu-0002", "gpu-0003")
    ]
    answer = {"status": "success", "data": {"resultType": "vector", "result": series}}
    with serve({"/api/v1/query": (200, answer)}) as server:
        TelemetrySource.objects.create(cluster=cluster, kind=SourceKind.PROMETHEUS, prometheus_url=server.url)
        result = run_cycle(cluster.pk)
        assert "__name__" in server.queries[0]
    assert result.unreachable == 1  # gpu-0004 has no series
    incident = Incident.objects.get(cause="xid-48")
    assert incident.node.name == "gpu-0001" and incident.severity == "critical"
    # The query returned GPU 2 only: the other seven of each answering node are missing from telemetry.
    assert Incident.objects.filter(cause="gpu-missing").count() == 3


def test_a_cleared_fault_lets_an_alert_incident_resolve_itself(fleet, settings):
    from apps.health.services.housekeeping import close_quiet_incidents

    cluster = fleet["cluster"]
    cycle(cluster)
    fault = inject(cluster, "gpu-0001", "thermal", 0)
    cycle(cluster)
    clear_fault(None, fault)
    cycle(cluster)
    incident = Incident.objects.get()
    assert incident.clean_since is not None
    settings.HEALTH_QUIET_S = 0
    assert close_quiet_incidents()["resolved"] == 1
    assert Incident.objects.get().state == "resolved"


def test_a_silent_exporter_does_not_make_incidents_look_quiet(fleet):
    cluster = fleet["cluster"]
    cycle(cluster)
    inject(cluster, "gpu-0001", "thermal", 0)
    cycle(cluster)
    inject(cluster, "gpu-0001", "exporter-down")
    cycle(cluster)
    cycle(cluster)
    thermal = Incident.objects.get(cause="thermal")
    assert thermal.clean_since is None  # no data is not good news
    assert Incident.objects.get(cause="exporter-down").clean_since is None


def test_counters_kept_between_cycles_feed_the_rate_rules_also_across_an_exporter_outage(fleet):
    """A cycle keeps only the counters the increase and rate rules compare with (`counters`), and reads them, not the
    last readings, next time: NVLink errors that grow between two scrapes fire; a scrape missed in between does not
    lose the comparison (the counters stay as they were) nor the readings shown on the node's page."""
    from apps.backends.simulator.services import advance_time
    from apps.health.services.rulesets import compiled_rules

    cluster = fleet["cluster"]
    cycle(cluster)
    health = NodeHealth.objects.get(node__name="gpu-0003")
    assert set(health.counters) == set(health.gpus)  # every GPU
    assert set(health.counters["2"]) == compiled_rules().previous & set(health.gpus["2"]["v"])
    assert "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL" in health.counters["2"]
    assert "DCGM_FI_DEV_GPU_TEMP" not in health.counters["2"]  # a gauge: no rule compares it with the last scrape

    outage = inject(cluster, "gpu-0003", "exporter-down")
    cycle(cluster)
    down = NodeHealth.objects.get(node__name="gpu-0003")
    assert not down.exporter_up and down.gpus == health.gpus and down.counters == health.counters
    clear_fault(None, outage)

    inject(cluster, "gpu-0003", "nvlink", 2)
    advance_time(None, cluster, 1)
    cycle(cluster)
    incident = Incident.objects.get(cause="nvlink")
    assert incident.node.name == "gpu-0003" and incident.gpus[0]["index"] == 2
    assert "rose by" in incident.evidence[0]["text"]


def test_each_cycle_stores_its_clusters_heatmap_cells_as_the_overview_computes_them(fleet):
    """Issue 23: the overview reads the cells the cycle stored (`UtilizationHeatmap`); they equal the computed."""
    from apps.dashboard import overview
    from apps.fleet.capacity import capacity_by_model
    from apps.health.models import UtilizationHeatmap

    cluster = fleet["cluster"]

    def both():
        node_sets: dict = {}
        count = sum(c.nodes for c in capacity_by_model(Node.objects.all(), node_sets=node_sets))
        return overview.utilization_heatmap(Node.objects.all(), count), overview.utilization_heatmap(
            Node.objects.all(), count, node_sets
        )

    cycle(cluster)
    stored = UtilizationHeatmap.objects.get(cluster=cluster)
    assert stored.nodes == 4 and stored.group_size == 1 and len(stored.cells) == 4 * 8
    computed, from_stored = both()
    assert computed["has_data"] and from_stored == computed
    inject(cluster, "gpu-0002", "exporter-down")
    cycle(cluster)  # the silent node's column goes blank in the stored cells too
    computed, from_stored = both()
    assert from_stored == computed and computed["readings"] == 3 * 8
    assert sum(cell[9] for cell in UtilizationHeatmap.objects.get(cluster=cluster).cells) == 3 * 8
