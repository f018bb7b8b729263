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


DEDUP = "max without (instance, pod) ("


def _dedup_bodies(expr: str) -> list[tuple[int, int]]:
    """(start, end) of the text inside each `max without (instance, pod) ( ... )`."""
    spans = []
    for start in (m.end() for m in re.finditer(re.escape(DEDUP), expr)):
        depth = 1
        for i in range(start, len(expr)):
            depth += {"(": 1, ")": -1}.get(expr[i], 0)
            if depth == 0:
                spans.append((start, i))
                break
    return spans


def test_database_series_are_counted_once_however_many_web_pods_are_scraped():
    """Every web pod serves the same database-derived series (workloads, GPUs, quotas, costs...): Prometheus scrapes
    each pod, so the dashboard takes one of them (`max without (instance, pod)`) right at the selector, before it
    adds anything up. The process's own series (request, task and backend-call timings) differ per pod and add up."""
    from apps.core import metrics as process_metrics

    per_process = {
        m._name
        for m in (
            process_metrics.REQUEST_SECONDS,
            process_metrics.TASK_SECONDS,
            process_metrics.TASK_LATENCY_SECONDS,
            process_metrics.BACKEND_CALL_SECONDS,
            process_metrics.BACKEND_CALL_ERRORS,
        )
    }
    board = json.loads(DASHBOARD.read_text())
    checked = 0
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            bodies = _dedup_bodies(expr)
            for m in re.finditer(r"\bgpuc_[a-z_]+", expr):
                name = re.sub(r"_(bucket|count|sum|total)$", "", m.group(0))
                inside = [(s, e) for s, e in bodies if s <= m.start() < e]
                if name in per_process:
                    assert not inside, f"{panel['title']}: {m.group(0)} is per process: add it up, never take one"
                    continue
                # Directly around the selector (or its rate): nothing is added up across pods before.
                assert inside and re.fullmatch(r"\s*((rate|increase)\()?", expr[inside[-1][0] : m.start()]), (
                    f"{panel['title']}: {m.group(0)} comes from the database; take `{DEDUP}...)` of it first: {expr}"
                )
                checked += 1
    assert checked >= 20
