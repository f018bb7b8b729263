"""Small builders for simulator tests: a simulated cluster with its backend, and runnable specs."""

from __future__ import annotations

from apps.backends.registry import get_backend
from apps.backends.simulator.backend import SimulatorBackend
from apps.backends.simulator.specs import OUTCOME_LABEL
from apps.backends.types import WorkloadSpec
from apps.fleet.models import Cluster
from apps.fleet.services import create_simulated_cluster


def make_cluster(
    name: str = "sim", nodes: int = 2, gpus: int = 8, models: dict | None = None, seed: int = 1, **shape
) -> tuple[Cluster, SimulatorBackend]:
    """A simulated cluster created as the system, and its backend from the registry."""
    cluster = create_simulated_cluster(
        None,
        name,
        {"nodes": nodes, "gpus_per_node": gpus, "models": models or {"h100": 1.0}, "seed": seed, **shape},
    )
    backend = get_backend(cluster)
    assert isinstance(backend, SimulatorBackend)
    return cluster, backend


def spec(name: str, *, outcome: str | None = "succeed", **fields) -> WorkloadSpec:
    """A spec with a fixed outcome (the seed decides when outcome is None)."""
    labels = dict(fields.pop("labels", {}))
    if outcome is not None:
        labels[OUTCOME_LABEL] = outcome
    fields.setdefault("tenant", "team-a")
    fields.setdefault("queue", "default")
    fields.setdefault("duration_s", 600)
    return WorkloadSpec(name=name, labels=labels, **fields)


def nodes_of(status) -> set[str]:
    return {p.node for p in status.placements}


def scrape_text(engine_or_backend, node: str) -> str:
    """A node's exporter text from the loaded engine state (no HTTP)."""
    from apps.backends.simulator import reports
    from apps.backends.simulator.engine import Engine

    cluster = getattr(engine_or_backend, "cluster", engine_or_backend)
    with Engine.open(cluster) as engine:
        return reports.node_metrics(engine, node)


def samples(text: str) -> dict[tuple[str, str], tuple[dict, float]]:
    """Parse exporter text with prometheus_client: {(metric, gpu index): (labels, value)}.

    Keyed by family name: the parser renames counter samples to `<name>_total`.
    """
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(family.name, sample.labels["gpu"])] = (sample.labels, sample.value)
    return out


def value(text: str, metric: str, gpu: int) -> float:
    return samples(text)[(metric, str(gpu))][1]
