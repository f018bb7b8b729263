"""Per-model hardware figures the catalog does not hold: clocks, idle power, host CPU and memory.

Numbers are the public specifications of the HGX/PCIe parts (rounded); they only need to look
right in telemetry and inventory. Models added to the catalog later fall back to DEFAULT.
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.backends.catalog import catalog_by_code


@dataclass(frozen=True)
class Hardware:
    sm_clock_max_mhz: int
    sm_clock_idle_mhz: int
    mem_clock_mhz: int
    idle_power_w: float  # telemetry jitters it by ±10 %: keep it within 30-70 W
    host_cpu_cores: int  # for an 8-GPU node; scaled by GPU count
    host_memory_gib: int  # for an 8-GPU node; scaled by GPU count


HARDWARE: dict[str, Hardware] = {
    "a100": Hardware(1410, 210, 1593, 52.0, 256, 1024),
    "h100": Hardware(1980, 345, 2619, 62.0, 224, 2048),
    "h200": Hardware(1980, 345, 3201, 62.0, 224, 2048),
    "l20": Hardware(2520, 210, 9001, 34.0, 128, 1024),
    "l40s": Hardware(2520, 210, 9001, 36.0, 128, 1024),
    "rtx4090": Hardware(2520, 210, 10501, 34.0, 64, 512),
}
DEFAULT = Hardware(1800, 300, 2000, 50.0, 128, 1024)

DRIVER_VERSION = "570.124.06"
MIG_SLICES = 7  # compute slices per MIG-capable GPU (A100/H100/H200)


@dataclass(frozen=True)
class ModelSpec:
    """What the simulator needs of one catalog entry."""

    code: str
    dcgm_name: str
    product_label: str
    memory_mib: int
    tdp_watts: int
    nvlink: bool
    mig_slices: dict[str, int]  # profile -> compute slices of 7
    hardware: Hardware


def _model_specs() -> dict[str, ModelSpec]:
    out = {}
    for code, entry in catalog_by_code().items():
        out[code] = ModelSpec(
            code=code,
            dcgm_name=entry["dcgm_names"][0],
            product_label=entry["product_labels"][0],
            memory_mib=entry["memory_mib"],
            tdp_watts=entry["tdp_watts"],
            nvlink=entry["nvlink"],
            mig_slices={profile: slices for profile, slices, _gb in entry["mig_profiles"]},
            hardware=HARDWARE.get(code, DEFAULT),
        )
    return out


MODELS: dict[str, ModelSpec] = _model_specs()


def pool_of(model: str) -> tuple[str, str]:
    """(pool, purpose) the simulator files a node under: NVLink boards train, PCIe cards serve, gaming cards dev."""
    if MODELS[model].nvlink:
        return f"{model}-training", "batch-training"
    if model == "rtx4090":
        return f"{model}-dev", "dev"
    return f"{model}-inference", "online-inference"
