"""One node's dcgm-exporter text, as the real exporter prints it. Pure Python: no Django, no queries.

Format (reference/gpu-health-and-isolation.md §1-2, dcgm-exporter's render_metrics.go): per metric a
`# HELP` and `# TYPE` line, then one line per GPU with the labels
gpu, UUID, pci_bus_id, device, modelName, Hostname|hostname, DCGM_FI_DRIVER_VERSION
and, for a GPU in use by a pod, container, namespace, pod. Integers print as %d, doubles as %f.

Values follow the work on each GPU (`GpuLoad`) and the faults that hit it, with jitter drawn from
(seed, GPU UUID, simulated minute): the same minute always renders the same numbers, in any process.
Counters grow with simulated time since the fleet booted, and faults add to them from the time they
were injected, so every counter is monotonic across scrapes and clears.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from apps.backends.simulator.faults import (
    CLOCK_EVENT_HW_SLOWDOWN,
    CLOCK_EVENT_HW_THERMAL,
    CLOCK_EVENT_IDLE,
    CLOCK_EVENT_SW_POWER_CAP,
    EFFECTS,
    FaultKind,
)
from apps.backends.simulator.hardware import DRIVER_VERSION, ModelSpec
from apps.backends.simulator.seeding import stable_hash, unit
from apps.backends.simulator.shape import NodeSpec

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
CONTAINER = "main"

# (name, Prometheus type, help, is_float), in the order the exporter's default CSV lists them.
METRICS: tuple[tuple[str, str, str, bool], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", False),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", False),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", False),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", False),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", True),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", False),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", False),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", False),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", False),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", False),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask).", False),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in ns).", False),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", False),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", False),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.", False),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.", False),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
        False,
    ),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink retries.", False),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink recovery errors.", False),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors", False),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors", False),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", False),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", True),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.", True),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        True,
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - "
        "in bytes per second.",
        False,
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - "
        "in bytes per second.",
        False,
    ),
)
# Off in dcgm-exporter's default-counters.csv: printed only when the fleet shape turns them on (`nvlink_traffic`).
NVLINK_TRAFFIC_METRICS: tuple[tuple[str, str, str, bool], ...] = (
    (
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "gauge",
        "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.",
        False,
    ),
    (
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "gauge",
        "The rate of data received over NVLink, not including protocol headers, in bytes per second.",
        False,
    ),
)
METRIC_NAMES = tuple(name for name, *_ in METRICS)
_HEADERS = tuple(
    f"# HELP {name} {help_}\n# TYPE {name} {kind}\n" for name, kind, help_, _ in (*METRICS, *NVLINK_TRAFFIC_METRICS)
)

# Fault-driven counter rates, per second of the fault being active.
_NVLINK_CRC_PER_S = 40.0
_NVLINK_REPLAY_PER_S = 5.0
_NVLINK_RECOVERY_PER_S = 1 / 60
_THERMAL_VIOLATION_RATIO = 0.6  # share of each second spent throttled
_REMAPPED_ROWS_ON_FAILURE = 8  # the bank's spare rows are exhausted when remapping fails
# Traffic of a fully busy training GPU, bytes per second: PCIe (input batches, checkpoints, host staging) a few
# GB/s; NVLink (gradient all-reduce) tens of GB/s on NVLink boards. An idle GPU moves a few kB/s of housekeeping.
_PCIE_BUSY_BPS = (1.5e9, 3.0e9)
_NVLINK_BUSY_BPS = (40e9, 60e9)
_IDLE_BPS = 20e3


@dataclass(slots=True)
class GpuLoad:
    """The work on one GPU: `load` 0..1 (whole 1, MIG slices/7, time-slice and MPS shares) and the pod shown on it.

    `computing` is the part of `load` that computes now (None: all of it). Work that holds a GPU without
    computing (a hung run, a data-loading phase) keeps its memory but not its utilization or traffic."""

    load: float = 0.0
    namespace: str = ""
    pod: str = ""
    computing: float | None = None


class FaultLike(Protocol):
    kind: str
    gpu_index: int | None
    injected_at: datetime
    cleared_at: datetime | None


def render_node_metrics(
    node: NodeSpec,
    model: ModelSpec,
    loads: Sequence[GpuLoad],
    faults: Sequence[FaultLike],
    *,
    seed: int,
    now: datetime,
    booted_at: datetime,
    hostname_label: str = "Hostname",
    driver_version: str = DRIVER_VERSION,
    nvlink_traffic: bool = False,
) -> str:
    """The node's /metrics text. `faults` are every fault ever injected on the node (cleared ones too).
    `nvlink_traffic` adds DCGM_FI_PROF_NVLINK_TX/RX_BYTES (off in the exporter's default counters)."""
    minute = int(now.timestamp() // 60)
    uptime = max((now - booted_at).total_seconds(), 0.0)
    labels = []
    rows = []
    for gpu, load in zip(node.gpus, loads, strict=True):
        label = (
            f'gpu="{gpu.index}",UUID="{gpu.uuid}",pci_bus_id="{gpu.pci_bus_id}",device="nvidia{gpu.index}",'
            f'modelName="{model.dcgm_name}",{hostname_label}="{node.name}",DCGM_FI_DRIVER_VERSION="{driver_version}"'
        )
        if load.pod:
            label += f',container="{CONTAINER}",namespace="{load.namespace}",pod="{load.pod}"'
        labels.append(label)
        hits = [f for f in faults if f.gpu_index is None or f.gpu_index == gpu.index]
        rows.append(
            _gpu_values(
                model,
                gpu.uuid,
                load.load,
                hits,
                seed=seed,
                minute=minute,
                now=now,
                uptime=uptime,
                computing=load.computing,
                nvlink_traffic=nvlink_traffic,
            )
        )
    out = []
    for column, (name, _kind, _help, is_float) in enumerate(
        (*METRICS, *NVLINK_TRAFFIC_METRICS) if nvlink_traffic else METRICS
    ):
        out.append(_HEADERS[column])
        for label, values in zip(labels, rows, strict=True):
            value = values[column]
            out.append(f"{name}{{{label}}} {value:f}\n" if is_float else f"{name}{{{label}}} {value:d}\n")
    return "".join(out)


def utilization_pct(load: float, jitter: int) -> int:
    """DCGM_FI_DEV_GPU_UTIL of a GPU under `load` (0..1) in the minute whose jitter is `jitter`.

    `jitter` is stable_hash(seed, GPU UUID, simulated minute); chargeback's idle-waste source reads the
    same figure for past minutes without rendering exporter text.
    """
    return min(100, round(load * (85 + 14 * unit(jitter, 0)))) if load > 0 else 0


def _fault_seconds(faults: Sequence[FaultLike], kind: str, now: datetime) -> float:
    total = 0.0
    for fault in faults:
        if fault.kind == kind and fault.injected_at <= now:
            end = fault.cleared_at if fault.cleared_at is not None and fault.cleared_at < now else now
            total += (end - fault.injected_at).total_seconds()
    return total


def _gpu_values(
    model: ModelSpec,
    uuid: str,
    load: float,
    faults: Sequence[FaultLike],
    *,
    seed: int,
    minute: int,
    now: datetime,
    uptime: float,
    computing: float | None = None,
    nvlink_traffic: bool = False,
) -> tuple:
    hw = model.hardware
    jitter = stable_hash(seed, uuid, minute)
    background = stable_hash(seed, uuid, "background")  # fixed per GPU: a few GPUs have a flaky PCIe link, etc.
    active = {f.kind for f in faults if f.cleared_at is None and f.injected_at <= now}
    lost = FaultKind.XID79 in active  # fell off the bus: no work reaches it any more
    thermal = FaultKind.THERMAL in active
    load = 0.0 if lost else min(max(load, 0.0), 1.0)
    held = load  # memory stays allocated while the work holding it computes nothing (hung, loading data)
    if computing is not None:
        load = min(load, max(computing, 0.0))
    busy = load > 0

    util = utilization_pct(load, jitter) if busy else 0
    mem_copy = round(util * (0.35 + 0.3 * unit(jitter, 8)))
    fb_used = round(model.memory_mib * held * (0.85 + 0.1 * unit(jitter, 16))) if held > 0 else 0
    fb_free = model.memory_mib - fb_used
    # Idle 30-35 °C; a fully busy GPU 60-80 °C.
    gpu_temp = 30 + round(5 * unit(jitter, 24)) + (round(load * (30 + 15 * unit(jitter, 32))) if busy else 0)
    idle_power = hw.idle_power_w * (0.9 + 0.2 * unit(jitter, 40))
    power = idle_power + (load * (model.tdp_watts * (0.85 + 0.13 * unit(jitter, 48)) - idle_power) if busy else 0)
    sm_clock = hw.sm_clock_max_mhz - round(60 * unit(jitter, 56)) if busy else hw.sm_clock_idle_mhz
    reasons = 0 if busy else CLOCK_EVENT_IDLE
    if busy and power > 0.95 * model.tdp_watts:
        reasons |= CLOCK_EVENT_SW_POWER_CAP
    if thermal:
        gpu_temp = max(gpu_temp, 88 + round(4 * unit(jitter, 24)))
        sm_clock = round(hw.sm_clock_max_mhz * 0.55) if busy else hw.sm_clock_idle_mhz
        power *= 0.7
        reasons |= CLOCK_EVENT_HW_SLOWDOWN | CLOCK_EVENT_HW_THERMAL
    if lost:
        power = idle_power * 0.5
    mem_temp = gpu_temp + 2 + round(4 * unit(jitter, 32))
    gr_active = util / 100 * (0.95 + 0.05 * unit(jitter, 0)) if busy else 0.0
    tensor_active = gr_active * (0.3 + 0.35 * unit(jitter, 8))
    dram_active = gr_active * (0.25 + 0.4 * unit(jitter, 16))

    idle_bps = _IDLE_BPS * unit(jitter, 4)
    pcie_tx = int(load * (_PCIE_BUSY_BPS[0] + (_PCIE_BUSY_BPS[1] - _PCIE_BUSY_BPS[0]) * unit(jitter, 12)) + idle_bps)
    pcie_rx = int(load * (_PCIE_BUSY_BPS[0] + (_PCIE_BUSY_BPS[1] - _PCIE_BUSY_BPS[0]) * unit(jitter, 20)) + idle_bps)

    # Counters: background rates over uptime, plus what the faults add from their injection on.
    hours = uptime / 3600
    energy_mj = int(uptime * (hw.idle_power_w + 0.35 * (model.tdp_watts - hw.idle_power_w)) * 1000)
    pcie_replays = int(hours * (1 + unit(background, 0))) if background % 16 == 0 else 0
    sbe = int(hours / 2) if background % 8 == 1 else 0
    dbe = sum(1 for f in faults if f.kind == FaultKind.XID48 and f.injected_at <= now)
    remap_failures = sum(1 for f in faults if f.kind == FaultKind.ROW_REMAP_FAILURE and f.injected_at <= now)
    uncorrectable_rows = dbe + _REMAPPED_ROWS_ON_FAILURE * remap_failures
    correctable_rows = (1 if background % 10 == 2 else 0) + 2 * remap_failures
    if model.nvlink:
        nvlink_s = _fault_seconds(faults, FaultKind.NVLINK, now)
        crc, replay, recovery = (
            int(nvlink_s * _NVLINK_CRC_PER_S),
            int(nvlink_s * _NVLINK_REPLAY_PER_S),
            int(nvlink_s * _NVLINK_RECOVERY_PER_S),
        )
    else:
        crc = replay = recovery = 0
    thermal_ns = int(_fault_seconds(faults, FaultKind.THERMAL, now) * _THERMAL_VIOLATION_RATIO * 1e9)
    # The last XID of a fault still active (clearing means the GPU was reset, which clears the value).
    last_xid, latest = 0, None
    for fault in faults:
        xid = EFFECTS[FaultKind(fault.kind)].xid
        if not xid or fault.cleared_at is not None or fault.injected_at > now:
            continue
        if latest is None or fault.injected_at >= latest:
            last_xid, latest = xid, fault.injected_at

    values = (
        sm_clock,
        hw.mem_clock_mhz,
        mem_temp,
        gpu_temp,
        power,
        energy_mj,
        pcie_replays,
        util,
        mem_copy,
        last_xid,
        reasons,
        thermal_ns,
        fb_free,
        fb_used,
        sbe,
        dbe,
        crc,
        replay,
        recovery,
        uncorrectable_rows,
        correctable_rows,
        1 if FaultKind.ROW_REMAP_FAILURE in active else 0,
        gr_active,
        tensor_active,
        dram_active,
        pcie_tx,
        pcie_rx,
    )
    if not nvlink_traffic:
        return values
    span = _NVLINK_BUSY_BPS[1] - _NVLINK_BUSY_BPS[0]
    nvlink_tx = int(load * (_NVLINK_BUSY_BPS[0] + span * unit(jitter, 28))) if model.nvlink else 0
    nvlink_rx = int(load * (_NVLINK_BUSY_BPS[0] + span * unit(jitter, 36))) if model.nvlink else 0
    return (*values, nvlink_tx, nvlink_rx)
