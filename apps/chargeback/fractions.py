"""The share of a physical GPU a worker holds, exactly (as a Fraction), for pricing fractional GPUs.

The share itself is defined once, in apps/backends/shares.py, for quota, admission and chargeback alike:
whole GPUs, a MIG profile's compute slices of 7, HAMi's larger of memory and compute share, 1/replicas for
time-slicing and MPS. OpenCost bills a HAMi pod with gpucores 25 as a whole GPU and Kubecost does not know MIG; here
the workload's own spec decides. Fractions stay exact until a record is stored (9 decimal places).
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

from apps.backends import shares
from apps.backends.shares import MIG_COMPUTE_SLICES, UnknownProfile, hami_share, mig_share, replica_share

__all__ = [
    "MIG_COMPUTE_SLICES",
    "UnknownProfile",
    "exact_seconds",
    "hami_share",
    "held_gpus",
    "mig_share",
    "replica_share",
    "to_decimal",
    "worker_share",
]

GPU_PLACES = Decimal("0.000000001")
SECOND_PLACES = Decimal("0.000001")


def worker_share(sharing: dict | None, gpus_per_worker: float, gpu_model) -> Fraction:
    """GPUs one worker holds under the spec's `sharing` (its to_dict form) on `gpu_model` (a GpuModel): the
    share admission counted against the queue's quota."""
    return shares.worker_share(sharing, gpus_per_worker, gpu_model.mig_profiles, gpu_model.memory_mib)


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
