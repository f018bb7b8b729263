"""Turning a backend's Inventory into Node and GPU rows: pure mapping, no queries."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

from apps.backends.types import NodeInfo


class ModelResolver:
    """Maps the strings backends report (product label, DCGM modelName, GRES type, code) to GpuModel ids."""

    def __init__(self, models):
        self._by_key: dict[str, int] = {}
        for model in models:
            keys = [model.name, model.code, *model.product_labels, *model.dcgm_names]
            for key in keys:
                self._by_key[_norm(key)] = model.pk

    def resolve(self, value: str) -> int | None:
        return self._by_key.get(_norm(value)) if value else None


def _norm(value: str) -> str:
    return value.strip().lower().replace(" ", "-").replace("_", "-")


HEALTH_ORDER = {"healthy": 0, "unknown": 1, "warning": 2, "unhealthy": 3}


def node_fields(info: NodeInfo, resolver: ModelResolver) -> dict:
    """The Node columns for one reported node (GPU aggregates included)."""
    model_id = resolver.resolve(info.gpu_model) or next(
        (resolver.resolve(g.model) for g in info.gpus if resolver.resolve(g.model)), None
    )
    allocated = sum(1 for g in info.gpus if g.allocated_fraction > 0 or g.allocated_to)
    unhealthy = sum(1 for g in info.gpus if g.health == "unhealthy")
    return {
        "gpu_model_id": model_id,
        "labels": dict(sorted(info.labels.items())),
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in info.taints],
        "unschedulable": info.unschedulable,
        "state": info.state,
        "state_reason": info.state_reason[:300],
        "rack": info.rack,
        "leaf_switch": info.leaf_switch,
        "nvlink_domain": info.nvlink_domain,
        "gpu_count": len(info.gpus),
        "gpu_allocatable": info.gpu_allocatable,
        "gpu_allocated": allocated,
        "gpu_unhealthy": unhealthy,
        "cpu_cores": info.cpu_cores,
        "memory_mib": info.memory_mib,
    }


def gpu_fields(gpu, resolver: ModelResolver) -> dict:
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "model_id": resolver.resolve(gpu.model),
        "memory_mib": gpu.memory_mib,
        "mig_enabled": gpu.mig_enabled,
        "mig_instances": gpu.mig_instances,
        "health": gpu.health if gpu.health in HEALTH_ORDER else "unknown",
        "health_reason": gpu.health_reason[:300],
        "allocated_to": ",".join(gpu.allocated_to)[:300],
        "allocated_fraction": min(max(float(gpu.allocated_fraction), 0.0), 1.0),
    }


def fingerprint(info: NodeInfo) -> str:
    """A digest of everything reported for the node, so an unchanged node is skipped on resync."""
    payload = json.dumps(asdict(info), sort_keys=True, default=str).encode()
    return hashlib.sha256(payload).hexdigest()
