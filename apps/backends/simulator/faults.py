"""The faults the simulator can inject and what each does to health, work and telemetry. Pure data."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from django.utils.translation import gettext_noop


class FaultKind(StrEnum):
    XID79 = "xid79"
    XID48 = "xid48"
    ROW_REMAP_FAILURE = "row-remap-failure"
    NVLINK = "nvlink"
    THERMAL = "thermal"
    EXPORTER_DOWN = "exporter-down"
    NODE_DOWN = "node-down"


@dataclass(frozen=True)
class FaultEffect:
    """What one fault does. `gpu_health` is the GPU's health while the fault is active ("" leaves it)."""

    message: str  # English, as the simulated node reports it; marked so that pages can show it translated
    on_gpu: bool  # hits a GPU (or every GPU of the node when no index is given); else the whole node
    gpu_health: str = ""
    fails_workloads: bool = False  # work on the hit GPUs / node dies, as a real crash would
    xid: int = 0  # the XID the driver logs (DCGM_FI_DEV_XID_ERRORS shows the last one)


EFFECTS: dict[FaultKind, FaultEffect] = {
    # XID 79: the GPU is gone from PCIe; every CUDA context on it dies; a reboot is needed.
    FaultKind.XID79: FaultEffect(gettext_noop("GPU fell off the bus (XID 79)"), True, "unhealthy", True, 79),
    # XID 48: uncorrectable (double-bit) ECC error; the process touching the memory is killed.
    FaultKind.XID48: FaultEffect(gettext_noop("double-bit ECC error (XID 48)"), True, "unhealthy", True, 48),
    # Row remapping failed: the GPU must be reset and likely replaced; running work survives until then.
    FaultKind.ROW_REMAP_FAILURE: FaultEffect(
        gettext_noop("row remapping failed (XID 64)"), True, "unhealthy", False, 64
    ),
    # NVLink CRC/replay/recovery errors: the link degrades, jobs slow down but keep running.
    FaultKind.NVLINK: FaultEffect(
        gettext_noop("NVLink errors (CRC, replay, recovery counters growing)"), True, "warning"
    ),
    # Thermal slowdown: clocks drop (HW slowdown + HW thermal), jobs run slower.
    FaultKind.THERMAL: FaultEffect(gettext_noop("thermal slowdown (HW slowdown, HW thermal)"), True, "warning"),
    # The exporter stops answering; the scheduler still sees the node and its GPUs.
    FaultKind.EXPORTER_DOWN: FaultEffect(gettext_noop("DCGM exporter not answering"), False),
    # The node is unreachable: its work is lost and its exporter is silent.
    FaultKind.NODE_DOWN: FaultEffect(gettext_noop("node down (unreachable)"), False, "unknown", True),
}

KINDS = tuple(kind.value for kind in FaultKind)
GPU_KINDS = frozenset(kind for kind, effect in EFFECTS.items() if effect.on_gpu)
SILENCES_EXPORTER = frozenset({FaultKind.EXPORTER_DOWN, FaultKind.NODE_DOWN})

# Clock-event reason bits (DCGM_FI_DEV_CLOCKS_EVENT_REASONS).
CLOCK_EVENT_IDLE = 0x1
CLOCK_EVENT_SW_POWER_CAP = 0x4
CLOCK_EVENT_HW_SLOWDOWN = 0x8
CLOCK_EVENT_HW_THERMAL = 0x40


def parse_kind(value: str) -> FaultKind:
    """The FaultKind named by `value`; ValueError listing the kinds otherwise."""
    try:
        return FaultKind(value)
    except ValueError:
        raise ValueError(f"unknown fault kind {value!r}; known: {', '.join(KINDS)}") from None
