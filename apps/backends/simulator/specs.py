"""Workload specs as the simulator takes them: validation, the placement request, seeded run length and outcome.

Pure Python. A spec the simulator cannot ever run (an unknown model, a MIG profile the model lacks,
more GPUs per worker than a node has) is a permanent error at submission, as a real API server's
validation would be; a spec that merely does not fit now is accepted and waits with a reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from apps.backends.base import PermanentBackendError
from apps.backends.simulator.hardware import MIG_SLICES, MODELS
from apps.backends.simulator.placement import Demand, Request, tolerations_from_labels
from apps.backends.simulator.seeding import rng
from apps.backends.simulator.shape import FleetShape
from apps.backends.types import SIM_HANG_LABEL, SIM_IDLE_PHASE_LABEL, Sharing, Topology, WorkloadSpec

OUTCOME_LABEL = "sim/outcome"  # "succeed", "fail" or "timeout" overrides the seeded outcome (tests, demos)
OUTCOMES = ("succeed", "fail", "timeout")
# Behaviours (tests, demos): apps/backends/types.py says what they do.
HANG_LABEL, IDLE_PHASE_LABEL = SIM_HANG_LABEL, SIM_IDLE_PHASE_LABEL
FAILURE_RATE = 0.05  # share of workloads the seed makes fail, part-way through their run
# Work under a runtime limit whose length nobody declared: most runs finish within 60-95 % of the limit, a few
# would need longer and are stopped by it (as jobs are on real clusters: Kubernetes DeadlineExceeded, Slurm
# TIMEOUT); an overrunning run's work is 1.1 to 2 times its limit.
TIMEOUT_RATE = 0.03
WITHIN_LIMIT = (0.6, 0.95)
OVERRUN = (1.1, 2.0)
MEDIAN_DURATION_S = 3600  # sampled durations: log-normal around an hour, 5 minutes to 12 hours
MIN_DURATION_S, MAX_DURATION_S = 300, 12 * 3600
MAX_WORKERS = 10_000


@dataclass(frozen=True)
class RunPlan:
    """How long a workload's work takes, whether it fails part-way, and its runtime limit, fixed at submission.
    The run ends at the first of: its failure, the end of its work, its limit (then it timed out)."""

    duration_s: int
    fail_after_s: int | None
    max_runtime_s: int | None = None
    hang_after_s: int | None = None
    idle_phase_s: int | None = None


def to_request(spec: WorkloadSpec, shape: FleetShape) -> Request:
    """Validate `spec` against the catalog and the fleet shape; PermanentBackendError says what is wrong."""

    def bad(message: str) -> PermanentBackendError:
        return PermanentBackendError(f"workload {spec.name!r}: {message}")

    if not spec.name or len(spec.name) > 253:
        raise bad("a name of 1 to 253 characters is required")
    if spec.gpu_model and spec.gpu_model not in MODELS:
        raise bad(f"unknown GPU model {spec.gpu_model!r}; known: {', '.join(sorted(MODELS))}")
    if not isinstance(spec.workers, int) or not 1 <= spec.workers <= MAX_WORKERS:
        raise bad(f"workers must be between 1 and {MAX_WORKERS}, not {spec.workers!r}")
    gang = spec.workers if spec.gang_min is None else spec.gang_min
    if not isinstance(gang, int) or not 1 <= gang <= spec.workers:
        raise bad(f"gang_min must be between 1 and workers ({spec.workers}), not {spec.gang_min!r}")
    try:
        sharing, topology = Sharing(spec.sharing), Topology(spec.topology)
    except ValueError as exc:
        raise bad(str(exc)) from None
    if sharing != Sharing.WHOLE and spec.gpus_per_worker != 1:
        raise bad(f"with {sharing} sharing each worker uses part of one GPU: gpus_per_worker must be 1")
    if sharing == Sharing.WHOLE:
        if not isinstance(spec.gpus_per_worker, int) or not 1 <= spec.gpus_per_worker <= shape.gpus_per_node:
            raise bad(f"gpus_per_worker must be between 1 and {shape.gpus_per_node} (GPUs per node here)")
        demand = Demand("whole", spec.gpus_per_worker)
    elif sharing == Sharing.MIG:
        demand = Demand("mig", _mig_slices(spec, bad), spec.mig_profile)
    else:
        fraction = spec.gpu_fraction
        if not isinstance(fraction, int | float) or not math.isfinite(fraction) or not 0 < fraction <= 1:
            raise bad(f"gpu_fraction must be above 0 and at most 1, not {fraction!r}")
        demand = Demand("mps" if sharing == Sharing.MPS else "shared", float(fraction))
    if spec.duration_s is not None and (not isinstance(spec.duration_s, int) or spec.duration_s < 1):
        raise bad(f"duration_s must be a positive number of seconds, not {spec.duration_s!r}")
    if spec.max_runtime_s is not None and (not isinstance(spec.max_runtime_s, int) or spec.max_runtime_s < 1):
        raise bad(f"max_runtime_s must be a positive number of seconds, not {spec.max_runtime_s!r}")
    if spec.labels.get(OUTCOME_LABEL, "succeed") not in OUTCOMES:
        raise bad(f"label {OUTCOME_LABEL} must be one of {', '.join(OUTCOMES)}")
    for label in (HANG_LABEL, IDLE_PHASE_LABEL):
        if label in spec.labels and _seconds(spec.labels[label]) is None:
            raise bad(f"label {label} must be a whole number of seconds, 0 or more, not {spec.labels[label]!r}")
    return Request(
        model=spec.gpu_model,
        workers=spec.workers,
        required=gang,
        demand=demand,
        topology=topology,
        tolerations=tolerations_from_labels(spec.labels) | _tolerated_keys(spec),
    )


def _seconds(value) -> int | None:
    text = str(value).strip()
    return int(text) if text.isdigit() else None


def _tolerated_keys(spec: WorkloadSpec) -> frozenset[str]:
    """What Kubernetes would be told to tolerate for this workload: its node pool's taints (the render context
    the console passes) and the spec's own tolerations, by key, as the simulator matches taints."""
    keys = {str(taint.get("key", "")) for taint in (spec.context.tolerations if spec.context else [])}
    keys |= {toleration.key for toleration in getattr(spec.source, "tolerations", None) or []}
    return frozenset(key for key in keys if key)


def _mig_slices(spec: WorkloadSpec, bad) -> int:
    if not spec.mig_profile:
        raise bad("MIG sharing needs a mig_profile, e.g. 1g.10gb")
    candidates = [spec.gpu_model] if spec.gpu_model else sorted(MODELS)
    for code in candidates:
        slices = MODELS[code].mig_slices.get(spec.mig_profile)
        if slices:
            return slices
    if spec.gpu_model:
        offered = ", ".join(MODELS[spec.gpu_model].mig_slices) or "none: it does not support MIG"
        raise bad(f"{spec.gpu_model} has no MIG profile {spec.mig_profile!r}; profiles: {offered}")
    raise bad(f"no GPU model offers MIG profile {spec.mig_profile!r}")


def run_plan(seed: int, spec: WorkloadSpec) -> RunPlan:
    """Duration (declared or drawn), outcome and limit, from the seed and the name only: reproducible anywhere.

    A declared duration is the work's length (a run whose work is longer than its limit is stopped by it).
    Without one, a run under a limit works a seeded share of it (WITHIN_LIMIT), or overruns it (TIMEOUT_RATE,
    OVERRUN); a run without a limit works a seeded log-normal length. The outcome label overrides the seed's
    draws: "fail" fails part-way, "timeout" makes the work overrun its limit, "succeed" neither.
    """
    draw = rng(seed, "workload", spec.name)
    # Always draw the same values in the same order, whichever branch uses them (new draws go last).
    sampled = draw.lognormvariate(math.log(MEDIAN_DURATION_S), 0.9)
    fails = draw.random() < FAILURE_RATE
    fail_point = draw.uniform(0.05, 0.95)
    overruns = draw.random() < TIMEOUT_RATE
    within, beyond = draw.uniform(*WITHIN_LIMIT), draw.uniform(*OVERRUN)
    limit = spec.max_runtime_s
    override = spec.labels.get(OUTCOME_LABEL)
    if override is not None:
        fails, overruns = override == "fail", override == "timeout"
    if spec.duration_s:
        duration = spec.duration_s
        if limit and override == "timeout":  # the seed never lengthens declared work; the label may
            duration = max(duration, int(limit * beyond))
    elif limit:
        duration = max(1, int(limit * (beyond if overruns else within)))
    else:
        duration = int(min(max(sampled, MIN_DURATION_S), MAX_DURATION_S))
    hang, idle = spec.labels.get(HANG_LABEL), spec.labels.get(IDLE_PHASE_LABEL)
    return RunPlan(
        duration,
        max(1, int(duration * fail_point)) if fails else None,
        limit,
        _seconds(hang) if hang is not None else None,
        _seconds(idle) if idle is not None else None,
    )


def spec_to_json(spec: WorkloadSpec) -> dict:
    """The spec as stored; what the real backends render (source, context, manifest) is not kept."""
    data = {f.name: getattr(spec, f.name) for f in fields(spec) if f.name not in ("source", "context", "manifest")}
    data.update(
        sharing=Sharing(spec.sharing).value,
        topology=Topology(spec.topology).value,
        labels=dict(spec.labels),
        command=list(spec.command),
    )
    return data


def spec_from_json(data: dict) -> WorkloadSpec:
    spec = WorkloadSpec(**data)
    spec.sharing, spec.topology = Sharing(spec.sharing), Topology(spec.topology)
    return spec


def share_label(demand: Demand) -> str:
    if demand.mode == "mig":
        return f"MIG {demand.profile} ({int(demand.size)}/{MIG_SLICES})"
    if demand.mode == "shared":
        return f"{demand.size:g} GPU"
    if demand.mode == "mps":
        return f"MPS replica (1/{round(1 / demand.size)} GPU)"
    return f"{int(demand.size)} GPU{'s' if demand.size > 1 else ''}"


def served_model(command: list[str]) -> str:
    """The model name the engine reports: vLLM's `serve <model>`, SGLang's `--model-path <model>`."""
    if len(command) > 2 and command[:2] == ["vllm", "serve"]:
        return command[2]
    if "--model-path" in command[:-1]:
        return command[command.index("--model-path") + 1]
    return "unknown"
