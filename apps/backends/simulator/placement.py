"""Where a workload fits: gang, GPU model, sharing and topology constraints over in-memory GPU slots.

Pure Python, no Django: the engine builds NodeState/GpuSlot from the database once per call and asks
`place()` for each pending workload. `place()` either commits the placement into the slots and
returns it, or returns the precise reason the workload must wait.

Sharing modes, per GPU:
- whole: a worker takes `size` empty GPUs of one node.
- mig: a worker takes one MIG instance of `size` compute slices (of 7); a GPU hosts instances up to 7 slices.
- shared (time-slicing, HAMi): a worker takes `size` (a fraction) of one GPU; shares on a GPU add up to 1.
- mps: a worker is one MPS replica, `size` = 1/replicas of one GPU. An MPS GPU runs in exclusive-process compute
  mode under one MPS server, split into equal replicas (the device plugin's sharing.mps: each replica capped at
  the same fraction of memory and compute, https://github.com/NVIDIA/k8s-device-plugin#with-cuda-mps): it takes
  replicas of the size its first replica set, and nothing else, until it is free again.
A GPU serves one mode at a time; it returns to "free" when its last holder leaves.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from apps.backends.simulator.hardware import MIG_SLICES
from apps.backends.simulator.shape import NodeSpec
from apps.backends.types import Taint, Topology

_EPSILON = 1e-9
FRACTIONAL = frozenset({"shared", "mps"})  # modes whose `size` is a fraction of one GPU
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
TOLERATE_PREFIX = "tolerate:"  # a workload label "tolerate:<taint key>" tolerates that taint


@dataclass(slots=True)
class GpuSlot:
    """One GPU as the scheduler sees it: healthy or not, its sharing mode, how much is used and by whom."""

    index: int
    healthy: bool = True
    mode: str = ""  # "" (free), "whole", "mig", "shared", "mps"
    used: float = 0.0  # whole: 1; mig: compute slices in use; shared and mps: sum of fractions
    holders: list = field(default_factory=list)  # the engine's allocation rows on this GPU
    replica: float = 0.0  # mps: the size of the GPU's replicas (1/replicas)


@dataclass(slots=True)
class NodeState:
    """One node's schedulability and GPU slots."""

    spec: NodeSpec
    mig_profiles: dict[str, int]  # of the node's model: profile -> compute slices
    slots: list[GpuSlot]
    cordoned: bool = False
    down: bool = False
    taints: list[Taint] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.name

    def blocking_taints(self, tolerations: frozenset[str]) -> list[Taint]:
        return [t for t in self.taints if t.effect in BLOCKING_EFFECTS and t.key not in tolerations]


@dataclass(frozen=True)
class Demand:
    """What one worker needs. `size`: GPUs (whole), compute slices (mig) or a fraction of one GPU (shared, mps)."""

    mode: str
    size: float
    profile: str = ""

    @property
    def share(self) -> float:
        """The part of one GPU each of the worker's GPUs holds (for usage and telemetry)."""
        if self.mode == "mig":
            return self.size / MIG_SLICES
        if self.mode in FRACTIONAL:
            return self.size
        return 1.0

    @property
    def gpus(self) -> int:
        """GPUs a worker touches."""
        return int(self.size) if self.mode == "whole" else 1

    def per_gpu(self, slot: GpuSlot) -> int:
        """How many workers of this demand one GPU could still take (mig/shared)."""
        if not slot.healthy:
            return 0
        if self.mode == "mig":
            if slot.mode not in ("", "mig"):
                return 0
            return int((MIG_SLICES - slot.used + _EPSILON) // self.size)
        if self.mode == "shared":
            if slot.mode not in ("", "shared"):
                return 0
            return int((1.0 - slot.used + _EPSILON) // self.size)
        if self.mode == "mps":
            if slot.mode not in ("", "mps") or (slot.mode == "mps" and abs(slot.replica - self.size) > _EPSILON):
                return 0
            return int((1.0 - slot.used + _EPSILON) // self.size)
        return 1 if slot.mode == "" else 0

    def node_capacity(self, node: NodeState) -> int:
        """Workers of this demand that fit on `node` now (ignoring cordon, taints: see `place`)."""
        if self.mode == "whole":
            free = sum(1 for slot in node.slots if slot.healthy and slot.mode == "")
            return free // int(self.size)
        return sum(self.per_gpu(slot) for slot in node.slots)

    def describe(self, model: str) -> str:
        what = model or "any model"
        if self.mode == "mig":
            return f"{self.profile} on {what}"
        if self.mode == "shared":
            return f"{self.size:g} of one {what} GPU"
        if self.mode == "mps":
            return f"MPS replica (1/{round(1 / self.size)}) of one {what} GPU"
        return f"{int(self.size)} × {what}"


@dataclass(frozen=True)
class Request:
    """A workload as the placer sees it."""

    model: str  # catalog code; "" accepts any
    workers: int
    required: int  # workers that must start together (gang); the rest are placed if they fit
    demand: Demand
    topology: Topology = Topology.ANY
    tolerations: frozenset[str] = frozenset()

    @property
    def signature(self) -> tuple:
        """Requests with equal signatures fit or fail alike; a pass remembers failures by it."""
        return (self.model, self.required, self.demand, self.topology, self.tolerations)


@dataclass(frozen=True)
class WorkerPlacement:
    worker: int
    node: str
    gpus: list[int]


_TOPOLOGY_PHRASE = {
    Topology.ANY: "",
    Topology.NODE: " on one node",
    Topology.NVLINK: " within one NVLink domain",
    Topology.LEAF: " within one leaf switch",
}


def _group_key(node: NodeState, topology: Topology) -> str:
    if topology == Topology.NODE:
        return node.name
    if topology == Topology.NVLINK:
        return node.spec.nvlink_domain
    if topology == Topology.LEAF:
        return node.spec.leaf_switch
    return ""


def tolerations_from_labels(labels: dict[str, str]) -> frozenset[str]:
    return frozenset(key[len(TOLERATE_PREFIX) :] for key in labels if key.startswith(TOLERATE_PREFIX))


def place(request: Request, nodes: Iterable[NodeState]) -> list[WorkerPlacement] | str:
    """Commit a placement of `request` into the slots and return it, or return why it cannot start now."""
    demand = request.demand
    excluded: Counter[str] = Counter()
    unhealthy = 0
    seen_model = False
    groups: dict[str, list[tuple[NodeState, int]]] = defaultdict(list)
    for node in nodes:
        if request.model and node.spec.model != request.model:
            continue
        if demand.mode == "mig" and demand.profile not in node.mig_profiles:
            continue
        if request.topology == Topology.NVLINK and not node.spec.nvlink_domain:
            continue
        seen_model = True
        if node.down:
            excluded["down"] += 1
            continue
        if node.cordoned:
            excluded["cordoned"] += 1
            continue
        if node.blocking_taints(request.tolerations):
            excluded["tainted"] += 1
            continue
        unhealthy += sum(1 for slot in node.slots if not slot.healthy)
        capacity = demand.node_capacity(node)
        if capacity:
            groups[_group_key(node, request.topology)].append((node, capacity))

    best_key, best_total, largest = None, 0, 0
    for key in sorted(groups):
        total = sum(capacity for _node, capacity in groups[key])
        largest = max(largest, total)
        # Best fit: the smallest group that holds the gang leaves bigger holes for bigger gangs.
        if total >= request.required and (best_key is None or total < best_total):
            best_key, best_total = key, total
    if best_key is None:
        return _reason(request, seen_model, largest, excluded, unhealthy)

    # Fill the fullest nodes first (fewest free workers) so whole nodes stay free for big jobs.
    members = sorted(groups[best_key], key=lambda item: (item[1], item[0].name))
    remaining = min(request.workers, best_total)
    placements: list[WorkerPlacement] = []
    worker = 0
    for node, capacity in members:
        for _ in range(min(capacity, remaining)):
            placements.append(WorkerPlacement(worker, node.name, _take(node, demand)))
            worker += 1
            remaining -= 1
        if not remaining:
            break
    return placements


def _take(node: NodeState, demand: Demand) -> list[int]:
    """Mark the GPUs one worker uses as taken and return their indexes."""
    if demand.mode == "whole":
        chosen = [slot for slot in node.slots if slot.healthy and slot.mode == ""][: int(demand.size)]
        for slot in chosen:
            slot.mode, slot.used = "whole", 1.0
        return [slot.index for slot in chosen]
    # MIG and shared: the most used GPU that still fits, so partly used GPUs fill up before empty ones.
    candidates = [slot for slot in node.slots if demand.per_gpu(slot)]
    slot = max(candidates, key=lambda s: (s.used, -s.index))
    slot.mode = demand.mode
    slot.used += demand.size
    if demand.mode == "mps":
        slot.replica = demand.size
    return [slot.index]


def release(slot: GpuSlot, mode: str, share: float, holder: object) -> None:
    """Give back what `holder` held on `slot` (the inverse of `_take`)."""
    if holder in slot.holders:
        slot.holders.remove(holder)
    if mode == "mig":
        slot.used -= round(share * MIG_SLICES)
    elif mode in FRACTIONAL:
        slot.used -= share
    else:
        slot.used = 0.0
    if not slot.holders or slot.used <= _EPSILON:
        slot.mode, slot.used, slot.replica = "", 0.0, 0.0


def occupy(slot: GpuSlot, mode: str, share: float, holder: object) -> None:
    """Mark an existing allocation (loaded from the database) as holding `slot`."""
    slot.holders.append(holder)
    slot.mode = mode
    slot.used += round(share * MIG_SLICES) if mode == "mig" else share
    if mode == "mps":
        slot.replica = share


def _reason(request: Request, seen_model: bool, largest: int, excluded: Counter, unhealthy: int) -> str:
    demand = request.demand
    if not seen_model:
        if demand.mode == "mig":
            return f"no {request.model + ' ' if request.model else ''}node offers MIG profile {demand.profile}"
        if request.topology == Topology.NVLINK:
            return f"no {request.model or 'GPU'} nodes with NVLink in this cluster"
        return f"no {request.model or 'GPU'} nodes in this cluster"
    count = f"{request.required}" if request.required == request.workers else f"{request.required} of {request.workers}"
    text = (
        f"needs {count} × {demand.describe(request.model)}{_TOPOLOGY_PHRASE[request.topology]}; "
        f"largest fit is {largest}"
    )
    notes = [f"{n} node{'s' if n > 1 else ''} {why}" for why, n in sorted(excluded.items())]
    if unhealthy:
        notes.append(f"{unhealthy} unhealthy GPU{'s' if unhealthy > 1 else ''}")
    if notes:
        text += f" (not counted: {', '.join(notes)})"
    return text
