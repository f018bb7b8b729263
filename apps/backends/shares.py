"""The GPU share: how much of one physical GPU a worker holds, the one unit of quota, admission and chargeback.

- whole GPUs: gpus_per_worker
- MIG: the profile's compute slices of 7 (1g.10gb on an A100-80GB is 1/7, 3g.40gb is 3/7), from the catalog
  (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/: a GPU has 7 compute slices)
- HAMi vGPU: the larger of its memory share and its compute share (gpucores is a percentage of the GPU)
  (https://github.com/Project-HAMi/HAMi: nvidia.com/gpumem in MiB, nvidia.com/gpucores in percent)
- time-slicing and MPS (the REPLICATED modes): 1 / replicas the node pool advertises per GPU
  (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html, and for MPS
  .../gpu-sharing-mps.html: each replica gets an equal fraction of the GPU's memory and compute); on Slurm
  the same replica is gres/mps of 100 / replicas of a GPU's 100 (https://slurm.schedmd.com/gres.html#MPS_Management)

Quota counts shares as whole numbers of `SHARE_UNITS`-ths of a GPU. Integers add up exactly in SQL (a queue's
use is a SUM under the admission lock) and fast in the admission engine; 1/7 has no exact decimal, and
Fractions would make every decision several times slower. SHARE_UNITS = 2^10 x 3^2 x 5^2 x 7 x 11 x 13, so every
MIG share (k/7), every HAMi core percentage, HAMi memory in 1/1024ths of a GPU, and time-slice or MPS replicas 2-16,
18, 20, 22, 24, 25, 26, 28, 30, 32, 33, 35, 36, 39, 40, ... 64 are exact. Anything else (17 replicas, 10,000
MiB of an 81,920 MiB GPU) is rounded up to the next unit, by less than 5e-9 GPU: never under-counted. The
chargeback meters the same share (apps/chargeback/fractions.py). A bigint holds 4e10 GPUs of units.

Pure Python, no Django: the spec parser (below the apps that store claims) derives a spec's share here.
"""

from __future__ import annotations

import math
from fractions import Fraction

from apps.backends.types import REPLICATED, Sharing

MIG_COMPUTE_SLICES = 7
SHARE_UNITS = 2**10 * 3**2 * 5**2 * 7 * 11 * 13  # 230,630,400 units per GPU
MAX_SHOWN_DENOMINATOR = 100  # "6 3/7"; a share whose fraction needs more is shown as a decimal ("0.122")


class UnknownProfile(ValueError):
    """A MIG profile the GPU model's catalog entry does not list."""


def on_grid(share: Fraction) -> Fraction:
    """`share` rounded up to a whole number of units (unchanged when it is one already)."""
    return Fraction(to_units(share), SHARE_UNITS)


def to_units(share: Fraction | int) -> int:
    """The share as units of 1/SHARE_UNITS GPU, rounded up. Pass an exact number (int or Fraction), never a float."""
    if isinstance(share, float):
        raise TypeError("a share is exact: pass an int or a Fraction, not a float")
    value = Fraction(share) * SHARE_UNITS
    return math.ceil(value)


def units_to_fraction(units: int) -> Fraction:
    return Fraction(int(units), SHARE_UNITS)


def mig_share(mig_profiles: list, profile: str) -> Fraction:
    """`mig_profiles` is the catalog's [(profile, compute slices, memory GB), ...] of the GPU model."""
    for name, slices, _memory_gb in mig_profiles or []:
        if name == profile:
            return Fraction(int(slices), MIG_COMPUTE_SLICES)
    raise UnknownProfile(f"MIG profile {profile!r} is not one of this GPU model's profiles")


def hami_share(memory_mib: int, gpumem_mib: int | None, gpucores: int | None) -> Fraction:
    memory = Fraction(int(gpumem_mib or 0), int(memory_mib)) if memory_mib else Fraction(0)
    cores = Fraction(int(gpucores or 0), 100)
    return on_grid(min(max(memory, cores), Fraction(1)))


def replica_share(replicas: int | None) -> Fraction:
    """One replica of a GPU split into `replicas` (time-slicing or MPS): 1/replicas."""
    return on_grid(Fraction(1, int(replicas))) if replicas else Fraction(1)


def worker_share(
    sharing: dict | None, gpus_per_worker: int | float, mig_profiles: list | None, memory_mib: int | None
) -> Fraction:
    """GPUs one worker holds under a spec's `sharing` (its to_dict form) on a model with these catalog values."""
    mode = (sharing or {}).get("mode", Sharing.WHOLE)
    if mode == Sharing.MIG:
        return mig_share(mig_profiles or [], sharing.get("mig_profile", ""))
    if mode == Sharing.HAMI:
        return hami_share(int(memory_mib or 0), sharing.get("gpumem_mib"), sharing.get("gpucores"))
    if mode in REPLICATED:
        return replica_share(sharing.get("replicas"))
    return Fraction(gpus_per_worker).limit_denominator(1000)


def format_share(value: Fraction | int, unit: int = 1) -> str:
    """A share for people: "16", "3/7", "6 3/7", or "0.122" when its fraction would need a denominator over 100.

    `value` counts units of 1/`unit` GPU (pass SHARE_UNITS for stored units; 1 for GPUs)."""
    if isinstance(value, int) and value % unit == 0:  # whole GPUs: most reasons, and every decision writes some
        return str(value // unit)
    share = Fraction(value, unit) if not isinstance(value, Fraction) else value / unit
    if share.denominator == 1:
        return str(share.numerator)
    if share.denominator > MAX_SHOWN_DENOMINATOR:
        return f"{float(share):.3f}".rstrip("0").rstrip(".")
    sign = "-" if share < 0 else ""
    whole, rest = divmod(abs(share.numerator), share.denominator)
    tail = f"{rest}/{share.denominator}"
    return f"{sign}{whole} {tail}" if whole else f"{sign}{tail}"


def gpus_number(units: int, unit: int = SHARE_UNITS) -> int | float:
    """Units as a JSON number of GPUs: an int when whole, else a float to 9 places (as chargeback stores GPUs)."""
    share = Fraction(int(units), unit)
    return share.numerator if share.denominator == 1 else round(float(share), 9)


# What `format_share` writes, as a regular expression (stored reasons are recognised by it, apps/core/stored_text).
SHARE_PATTERN = r"-?(?:\d+ \d+/\d+|\d+/\d+|\d+(?:\.\d+)?)"
