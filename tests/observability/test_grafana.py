"""The Grafana dashboard (deploy/kubernetes/base/grafana) loads, has what Grafana needs, queries only served series."""

import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from apps.backends.simulator import telemetry

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "base" / "grafana" / "gpu-console.json"


def test_dashboard_has_the_fields_grafana_requires():
    board = json.loads(DASHBOARD.read_text())
    for key in ("uid", "title", "panels", "schemaVersion", "time", "templating"):
        assert key in board, key
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in ("x", "y", "w", "h")) and grid["x"] + grid["w"] <= 24
        assert panel["type"] in {"row", "timeseries", "stat", "bargauge", "table"}
        if panel["type"] != "row":
            assert panel["title"] and panel["targets"]
            assert all(t["refId"] and t["expr"] for t in panel["targets"])
    assert {v["name"] for v in board["templating"]["list"]} == {"datasource", "tenant"}


def test_every_queried_series_exists(fleet, client):
    families = list(text_string_to_metric_families(client.get("/metrics").content.decode()))
    served = {f.name for f in families} | {f"{f.name}_total" for f in families if f.type == "counter"}
    served |= {f"{f.name}{x}" for f in families if f.type == "histogram" for x in ("_bucket", "_count", "_sum")}
    served |= {s.name for f in families for s in f.samples}
    served |= {"gpuc_backend_call_errors_total"}  # a process counter appears once something is counted
    dcgm = set(re.findall(r"DCGM_FI_[A-Z_]+", Path(telemetry.__file__).read_text()))
    board = json.loads(DASHBOARD.read_text())
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            for name in re.findall(r"\b(gpuc_[a-z_]+|DCGM_FI_[A-Z_]+)\b", target["expr"]):
                known = served if name.startswith("gpuc_") else dcgm
                assert name in known, f"{panel['title']}: {name} is not served"
