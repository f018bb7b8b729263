"""`sharing`: how a training worker holds its GPU (whole GPUs, a MIG instance, a time-slice or MPS replica or a
HAMi vGPU), the fields each mode needs, what the GPU model supports, and the share of one GPU a worker holds."""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

from pydantic import ConfigDict, PrivateAttr, model_validator

from apps.backends.render.spec import GpuSharing
from apps.backends.shares import hami_share, mig_share, replica_share, to_units
from apps.backends.types import REPLICATED, Sharing
from apps.core.text import N_, Text
from apps.workloads.specs.checks import mig_per_gpu, mig_profiles
from apps.workloads.specs.fields import Problems, SpecModel, described
from apps.workloads.specs.model import SHARING_MODES

# The fields that belong to modes, and what a message calls those modes.
_MODES_OF: dict[str, tuple[frozenset[Sharing], Text | str]] = {
    "mig_profile": (frozenset({Sharing.MIG}), "MIG"),
    "replicas": (REPLICATED, N_("time-slice or MPS")),
    "gpumem_mib": (frozenset({Sharing.HAMI}), "HAMi"),
    "gpucores": (frozenset({Sharing.HAMI}), "HAMi"),
}
# MPS serves at most 48 clients per GPU on Volta and newer (16 before): the device plugin's limit on replicas
# (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing-mps.html#limitations).
MPS_MAX_REPLICAS = 48


class SharingModel(SpecModel):
    model_config = ConfigDict(title="Sharing")
    SPEC = GpuSharing

    mode: Literal[SHARING_MODES] = described(  # type: ignore[valid-type]
        N_("Mode"), N_("whole GPUs, one MIG instance, a time-slice or MPS replica or a HAMi vGPU"), "whole"
    )
    mig_profile: str = described(
        N_("MIG profile"), N_("mig: a profile of the GPU model, e.g. 1g.10gb"), "", schema={"maxLength": 32}
    )
    replicas: int | None = described(
        N_("Replicas per GPU"), N_("time-slice and mps: as the node pool has it"), None, ge=2, le=64
    )
    gpumem_mib: int | None = described(N_("vGPU memory (MiB)"), N_("hami: per worker"), None, ge=1, le=1 << 20)
    gpucores: int | None = described(N_("vGPU compute (%)"), N_("hami: of the GPU's compute"), None, ge=1, le=100)

    _share: Fraction = PrivateAttr(default=Fraction(1))

    @model_validator(mode="after")
    def _fields_of_the_mode(self) -> SharingModel:
        problems = Problems()
        for key, (modes, name) in _MODES_OF.items():
            if getattr(self, key) not in (None, "") and self.mode not in modes:
                problems.add(key, N_("applies to %(applies)s sharing, not %(mode)r", applies=name, mode=self.mode))
        if self.mode == Sharing.MIG and not self.mig_profile:
            problems.add("mig_profile", N_("required with MIG sharing, e.g. 1g.10gb or 3g.40gb"))
        if self.mode == Sharing.TIME_SLICE and self.replicas is None:
            problems.add(
                "replicas", N_("required with time-slice sharing: the replicas per GPU of the node pool (2-64)")
            )
        if self.mode == Sharing.MPS and self.replicas is None:
            problems.add("replicas", N_("required with MPS sharing: the replicas per GPU of the node pool (2-48)"))
        if self.mode == Sharing.MPS and self.replicas is not None and self.replicas > MPS_MAX_REPLICAS:
            problems.add(
                "replicas",
                N_(
                    "MPS serves at most %(most)s clients per GPU: %(replicas)s replicas cannot be configured",
                    most=MPS_MAX_REPLICAS,
                    replicas=self.replicas,
                ),
            )
        for key in ("gpumem_mib", "gpucores"):
            if self.mode == Sharing.HAMI and getattr(self, key) is None:
                problems.add(
                    key, N_("required with HAMi sharing (gpumem_mib: device memory in MiB; gpucores: percent)")
                )
        problems.check()
        return self

    def share(self, problems: Problems, model: str | None, catalog: dict[str, dict]) -> Fraction | None:
        """The share of one GPU a worker holds, as apps/backends/shares.py defines it (what quota, admission and
        chargeback count), kept for `gpu_sharing`; None, with the problem added, when the GPU model cannot be
        shared this way. Without a valid GPU model, what needs its catalog entry is left to that field's error."""
        entry = catalog.get(model) if model else None
        if self.mode == Sharing.MIG and entry is not None:
            profiles = mig_profiles(entry)
            if not profiles:
                capable = ", ".join(sorted(code for code, e in catalog.items() if e.get("mig_profiles"))) or N_("none")
                problems.add(
                    ("sharing", "mode"),
                    N_("%(model)s does not support MIG; MIG-capable models: %(capable)s", model=model, capable=capable),
                )
                return None
            if self.mig_profile not in profiles:
                problems.add(
                    ("sharing", "mig_profile"),
                    N_(
                        "%(model)s has no MIG profile %(profile)r; profiles: %(profiles)s",
                        model=model,
                        profile=self.mig_profile,
                        profiles=", ".join(profiles),
                    ),
                )
                return None
            self._share = mig_share(entry.get("mig_profiles"), self.mig_profile)
        elif self.mode in REPLICATED:
            self._share = replica_share(self.replicas)
        elif self.mode == Sharing.HAMI:
            memory = int((entry or {}).get("memory_mib") or 0)
            if memory and self.gpumem_mib > memory:  # type: ignore[operator]
                problems.add(
                    ("sharing", "gpumem_mib"),
                    N_(
                        "%(gpumem)s MiB is more than the %(memory)s MiB of a %(model)s GPU",
                        gpumem=self.gpumem_mib,
                        memory=memory,
                        model=model,
                    ),
                )
                return None
            self._share = hami_share(memory, self.gpumem_mib, self.gpucores)
        return self._share

    def per_gpu(self, entry: dict | None) -> int:
        """Workers of this sharing mode one GPU holds (for the "all on one node" check)."""
        if self.mode == Sharing.MIG and entry:
            profile = mig_profiles(entry).get(self.mig_profile)
            return mig_per_gpu(profile, round(int(entry.get("memory_mib") or 0) / 1024)) if profile else 1
        if self.mode in REPLICATED:
            return self.replicas or 1
        if self.mode == Sharing.HAMI and entry and self.gpumem_mib and self.gpucores:
            return max(1, min(int(entry.get("memory_mib") or 0) // self.gpumem_mib, 100 // self.gpucores))
        return 1

    def gpu_sharing(self) -> GpuSharing:
        return self.spec(fraction=round(float(self._share), 6), units=to_units(self._share))
