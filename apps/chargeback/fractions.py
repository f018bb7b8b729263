"""The share of a physical GPU a worker holds, exactly (as a Fraction), for pricing fractional GPUs.

- whole GPUs: gpus_per_worker
- MIG: the profile's compute slices of 7 (1g.10gb on an A100-80GB is 1/7, 3g.40gb is 3/7), from the catalog
- HAMi vGPU: the larger of its memory share and its compute share (gpucores is a percentage)
- time-slicing: 1 / replicas the node pool advertises per GPU

OpenCost bills a HAMi pod with gpucores 25 as a whole GPU and Kubecost does not know MIG; here the
workload's own spec decides. Fractions stay exact until a record is stored (9 decimal places).
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

from apps.backends.types import Sharing

MIG_COMPUTE_SLICES = 7
GPU_PLACES = Decimal("0.000000001")
SECOND_PLACES = Decimal("0.000001")


class UnknownProfile(ValueError):
    """A MIG profile the GPU model's catalog entry does not list."""


def mig_share(mig_profiles: list, profile: str) -> Fraction:
    """`mig_profiles` is the catalog's [(profile, compute slices, memory GB), ...] of the GPU model."""
    for name, slices, _memory_gb in mig_profiles:
        if name == profile:
            return Fraction(int(slices), MIG_COMPUTE_SLICES)
    raise UnknownProfile(f"MIG profile {profile!r} is not one of this GPU model's profiles")


def hami_share(memory_mib: int, gpumem_mib: int | None, gpucores: int | None) -> Fraction:
    memory = Fraction(int(gpumem_mib or 0), int(memory_mib)) if memory_mib else Fraction(0)
    cores = Fraction(int(gpucores or 0), 100)
    return min(max(memory, cores), Fraction(1))


def time_slice_share(replicas: int | None) -> Fraction:
    return Fraction(1, int(replicas)) if replicas else Fraction(1)


def worker_share(sharing: dict | None, gpus_per_worker: float, gpu_model) -> Fraction:
    """GPUs one worker holds under the spec's `sharing` (its to_dict form) on `gpu_model` (a GpuModel)."""
    mode = (sharing or {}).get("mode", Sharing.WHOLE.value)
    if mode == Sharing.MIG:
        return mig_share(gpu_model.mig_profiles, sharing.get("mig_profile", ""))
    if mode == Sharing.HAMI:
        return hami_share(gpu_model.memory_mib, sharing.get("gpumem_mib"), sharing.get("gpucores"))
    if mode == Sharing.TIME_SLICE:
        return time_slice_share(sharing.get("replicas"))
    return Fraction(gpus_per_worker).limit_denominator(1000)


def held_gpus(reported: float, share: Fraction) -> Fraction:
    """The GPUs a record holds: the backend's (float) figure snapped to whole workers of `share`.

    The backend reports e.g. 0.42857142857 for three 1/7 slices; the spec knows it is exactly 3/7.
    A record whose figure is not near a whole number of workers keeps the backend's figure.
    """
    if share <= 0:
        return Fraction(reported).limit_denominator(10**6)
    workers = round(Fraction(reported) / share)
    if workers > 0 and abs(workers * share - Fraction(reported)) <= Fraction(1, 10**6):
        return workers * share
    return Fraction(reported).limit_denominator(10**6)


def to_decimal(value: Fraction, places: Decimal = GPU_PLACES) -> Decimal:
    return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(places, rounding=ROUND_HALF_EVEN)


def exact_seconds(delta) -> Fraction:
    """A timedelta as exact seconds (timedelta.total_seconds() is a float)."""
    return Fraction(delta.days * 86_400 + delta.seconds) + Fraction(delta.microseconds, 10**6)
