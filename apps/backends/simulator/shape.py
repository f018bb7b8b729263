"""The fleet shape of a simulated cluster and the fleet it generates. Pure Python: no Django.

A shape is small (a handful of numbers and a model mix) and is what gets stored; the fleet (node
names, racks, leaf switches, GPU UUIDs, PCI bus ids) is regenerated from it on demand and cached
per process, so 1,280 nodes cost one generation per process, not one per request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from hashlib import blake2b

from apps.backends.simulator.hardware import MODELS
from apps.backends.simulator.seeding import rng

HOSTNAME_LABELS = ("Hostname", "hostname")  # dcgm-exporter before / after PR #655 (2026-05-12)
MAX_NODES = 20_000

# PCI bus numbers of the 8 GPUs of an HGX H100 board, then a second set for 16-GPU nodes.
_PCI_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB", "19", "2B", "3B", "5E", "9B", "AC", "BB", "DC")


class ShapeError(ValueError):
    """An invalid fleet shape; `field` names the input at fault so forms and the API can point at it."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass
class FleetShape:
    """How many nodes of which GPU models, racked how. `models` maps catalog codes to fractions summing to 1."""

    nodes: int
    gpus_per_node: int = 8
    models: dict[str, float] = field(default_factory=lambda: {"h100": 1.0})
    seed: int = 0
    nodes_per_rack: int = 8
    racks_per_leaf: int = 4
    hostname_label: str = "Hostname"
    # The exporter also prints DCGM_FI_PROF_NVLINK_TX/RX_BYTES (off in dcgm-exporter's default counters).
    nvlink_traffic: bool = False

    def validate(self) -> FleetShape:
        """Raise ShapeError naming the first field at fault; return self so calls can chain."""
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or self.nodes <= 0:
            raise ShapeError("nodes", f"nodes must be a positive whole number, not {self.nodes!r}")
        if self.nodes > MAX_NODES:
            raise ShapeError("nodes", f"at most {MAX_NODES} nodes, not {self.nodes}")
        if isinstance(self.gpus_per_node, bool) or not isinstance(self.gpus_per_node, int):
            raise ShapeError("gpus_per_node", f"gpus_per_node must be a whole number, not {self.gpus_per_node!r}")
        if not 1 <= self.gpus_per_node <= 16:
            raise ShapeError("gpus_per_node", f"gpus_per_node must be between 1 and 16, not {self.gpus_per_node}")
        _validate_models(self.models)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ShapeError("seed", f"seed must be a whole number, not {self.seed!r}")
        for name in ("nodes_per_rack", "racks_per_leaf"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 256:
                raise ShapeError(name, f"{name} must be between 1 and 256, not {value!r}")
        if self.hostname_label not in HOSTNAME_LABELS:
            raise ShapeError("hostname_label", f"hostname_label must be one of {', '.join(HOSTNAME_LABELS)}")
        if not isinstance(self.nvlink_traffic, bool):
            raise ShapeError("nvlink_traffic", f"nvlink_traffic must be true or false, not {self.nvlink_traffic!r}")
        return self

    @property
    def key(self) -> tuple:
        """A hashable identity of the shape, for caches."""
        return (
            self.nodes,
            self.gpus_per_node,
            tuple(sorted(self.models.items())),  # JSONB does not keep key order: never depend on it
            self.seed,
            self.nodes_per_rack,
            self.racks_per_leaf,
            self.hostname_label,
        )  # not nvlink_traffic: the same fleet, only its exporters print two more series

    def to_dict(self) -> dict:
        data = {
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "models": dict(self.models),
            "seed": self.seed,
            "nodes_per_rack": self.nodes_per_rack,
            "racks_per_leaf": self.racks_per_leaf,
            "hostname_label": self.hostname_label,
        }
        if self.nvlink_traffic:  # shapes stored before it existed, and equal to them, stay as they were
            data["nvlink_traffic"] = True
        return data

    @classmethod
    def from_dict(cls, data: dict) -> FleetShape:
        """Build from stored JSON or user input; unknown keys are an error (typos must not pass silently)."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ShapeError(unknown[0], f"unknown shape field {unknown[0]!r}; known: {', '.join(sorted(known))}")
        models = data.get("models", {"h100": 1.0})
        if isinstance(models, str):
            models = parse_models(models)
        return cls(**{**data, "models": models})

    def model_counts(self) -> dict[str, int]:
        """Nodes per model code, by largest remainder so the counts sum to `nodes` and follow the mix."""
        exact = {code: fraction * self.nodes for code, fraction in self.models.items()}
        counts = {code: math.floor(value) for code, value in exact.items()}
        left = self.nodes - sum(counts.values())
        # Ties go by code: the stored mix (JSONB) does not keep the order it was written in.
        order = sorted(exact, key=lambda code: (-(exact[code] - counts[code]), code))
        for code in order[:left]:
            counts[code] += 1
        return counts

    def describe(self) -> str:
        by_size = sorted(self.model_counts().items(), key=lambda item: (-item[1], item[0]))
        counts = ", ".join(f"{code} {count}" for code, count in by_size)
        return f"{self.nodes} nodes × {self.gpus_per_node} GPUs ({counts}), seed {self.seed}"


def _validate_models(models: object) -> None:
    if not isinstance(models, dict) or not models:
        raise ShapeError("models", "models must map GPU model codes to fractions, e.g. h100:0.5,a100:0.5")
    for code, fraction in models.items():
        if code not in MODELS:
            raise ShapeError("models", f"unknown model {code!r}; known: {', '.join(sorted(MODELS))}")
        if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not math.isfinite(fraction):
            raise ShapeError("models", f"the fraction of {code} must be a number, not {fraction!r}")
        if not 0 < fraction <= 1:
            raise ShapeError("models", f"the fraction of {code} must be above 0 and at most 1, not {fraction}")
    total = sum(models.values())
    if abs(total - 1) > 1e-6:
        raise ShapeError("models", f"the model fractions must sum to 1, not {total:g}")


def parse_models(text: str) -> dict[str, float]:
    """`"h100:0.5,a100:0.3,l40s:0.2"` -> {"h100": 0.5, ...}; ShapeError("models") on bad syntax."""
    out: dict[str, float] = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        code, sep, value = part.partition(":")
        code = code.strip().lower()
        if not sep or not code:
            raise ShapeError("models", f"write each model as code:fraction, e.g. h100:0.5 (got {part!r})")
        try:
            fraction = float(value)
        except ValueError:
            raise ShapeError("models", f"the fraction of {code} must be a number, not {value.strip()!r}") from None
        if code in out:
            raise ShapeError("models", f"model {code!r} is listed twice")
        out[code] = fraction
    if not out:
        raise ShapeError("models", "give at least one model, e.g. h100:1")
    return out


@dataclass(frozen=True, slots=True)
class GpuSpec:
    index: int
    uuid: str
    pci_bus_id: str


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One generated node: identity, model, place in the network, and its GPUs."""

    name: str
    model: str  # catalog code
    rack: str
    leaf_switch: str
    nvlink_domain: str  # the node itself on HGX (NVLink) boards, "" for PCIe-only models
    cpu_cores: int
    memory_mib: int
    gpus: tuple[GpuSpec, ...]


def generate(shape: FleetShape) -> tuple[NodeSpec, ...]:
    """The fleet of `shape`, deterministic from its seed. Cached per process (the result is immutable)."""
    return _generate(shape.key)


def nodes_by_name(shape: FleetShape) -> dict[str, NodeSpec]:
    return _by_name(shape.key)


@lru_cache(maxsize=32)
def _by_name(key: tuple) -> dict[str, NodeSpec]:
    return {node.name: node for node in _generate(key)}


@lru_cache(maxsize=32)
def _generate(key: tuple) -> tuple[NodeSpec, ...]:
    nodes, gpus_per_node, models, seed, nodes_per_rack, racks_per_leaf, _label = key
    shape = FleetShape(nodes, gpus_per_node, dict(models), seed, nodes_per_rack, racks_per_leaf)
    # Models come in contiguous blocks (whole racks of one model, as bought), in an order drawn from the seed.
    order = sorted(shape.models)
    rng(seed, "model-order").shuffle(order)
    counts = shape.model_counts()
    assignment = [code for code in order for _ in range(counts[code])]
    width = max(4, len(str(nodes)))
    buses = [f"00000000:{bus}:00.0" for bus in _PCI_BUSES]
    out = []
    for i, code in enumerate(assignment):
        name = f"gpu-{i + 1:0{width}d}"
        rack = i // nodes_per_rack
        spec = MODELS[code]
        hw = spec.hardware
        # One hash state per node, extended by the GPU index: half the cost of hashing each GPU from scratch.
        base = blake2b(f"{seed}\x1fuuid\x1f{name}".encode(), digest_size=16)
        gpus = []
        for g in range(gpus_per_node):
            state = base.copy()
            state.update(g.to_bytes(2, "big"))
            h = state.hexdigest()
            gpus.append(GpuSpec(g, f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}", buses[g]))
        out.append(
            NodeSpec(
                name=name,
                model=code,
                rack=f"rack-{rack + 1:02d}",
                leaf_switch=f"leaf-{rack // racks_per_leaf + 1:02d}",
                nvlink_domain=name if spec.nvlink else "",
                cpu_cores=max(16, hw.host_cpu_cores * gpus_per_node // 8),
                memory_mib=max(64, hw.host_memory_gib * gpus_per_node // 8) * 1024,
                gpus=tuple(gpus),
            )
        )
    return tuple(out)
