"""Only the backends know a cluster's kind: no code outside apps/backends branches on it or reads the simulator.

Code above the backends asks the cluster's backend (`get_backend(cluster)`, apps/backends/base.py) instead: its
clock (`now`), where a workload's logs are (`workload_logs`, `namespaced`), its own telemetry
(`telemetry_in_process`, `node_metrics`, `service_metrics`, `gpu_utilization`, `service_metrics_url`) and its
simulation's controls (`simulation()`: faults, clock, fleet shape), and how it renders (`renderer`, `render`,
`push_quota`). A fourth backend then touches no caller.

Pure text checks over apps/ (outside apps/backends and migrations) and templates/, no database. console/ (URL
wiring, which may mount a backend's own views) is not checked.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KIND = r"""(?:ClusterKind\.\w+|["'](?:simulated|kubernetes|slurm)["'])"""

PYTHON_CHECKS = [
    ("compares a cluster's kind", re.compile(r"\bcluster\.kind\s*(?:==|!=|\bnot\s+in\b|\bin\b)")),
    ("compares a kind with a cluster kind", re.compile(rf"\bkind\s*(?:==|!=)\s*{KIND}|{KIND}\s*(?:==|!=)\s*\w*kind\b")),
    ("tests a kind against cluster kinds", re.compile(rf"\bkind\s+(?:not\s+)?in\s*[(\[{{][^\n]*{KIND}")),
    (
        "filters clusters by kind",
        re.compile(rf"\.(?:filter|exclude|get)\([^\n]*\bkind(?:__in)?\s*=\s*[(\[{{]?\s*{KIND}"),
    ),
    (
        "imports the simulator or the backends' models",
        re.compile(
            r"^\s*(?:from\s+apps\.backends\.(?:models|simulator)\b|import\s+apps\.backends\.(?:models|simulator)\b"
            r"|from\s+apps\.backends\s+import\s+[^\n]*\b(?:models|simulator)\b)"
        ),
    ),
]
TEMPLATE_CHECKS = [
    ("compares a cluster's kind", re.compile(r"\bcluster\.kind\s*(?:==|!=)")),
    ("compares a kind with a cluster kind", re.compile(rf"\bkind\s*(?:==|!=)\s*{KIND}")),
]


def _files():
    for path in sorted((ROOT / "apps").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("apps/backends/") or "/migrations/" in relative:
            continue
        yield relative, path, PYTHON_CHECKS
    for path in sorted((ROOT / "templates").rglob("*.html")):
        yield path.relative_to(ROOT).as_posix(), path, TEMPLATE_CHECKS


def _findings() -> list[tuple[str, int, str, str]]:
    found = []
    for relative, path, checks in _files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            for what, pattern in checks:
                if pattern.search(line):
                    found.append((relative, number, what, line.strip()))
                    break
    return found


def test_only_the_backends_know_a_clusters_kind():
    offenders = _findings()
    assert not offenders, (
        "Outside apps/backends, code branches on a cluster's kind or reads the simulator. Ask the cluster's "
        "backend instead (get_backend(cluster): now(), workload_logs(), telemetry_in_process, node_metrics(), "
        "service_metrics(), gpu_utilization(), service_metrics_url(), simulation()), or add what you need to the "
        "Backend interface (apps/backends/base.py) with a default and implement it in each backend:\n"
        + "\n".join(f"  {path}:{number}: {what}: {text}" for path, number, what, text in offenders)
    )
