"""Conversions: the backends' WorkloadSpec, and template overrides."""

from __future__ import annotations

import copy
import math

from apps.backends.render.spec import Spec, TrainingJobSpec
from apps.backends.render.workload.engines import engine_argv
from apps.backends.types import (
    ENGINE_LABEL,
    ENGINES_LABEL,
    KIND_LABEL,
    MAX_REPLICAS_LABEL,
    MIN_REPLICAS_LABEL,
    SIM_ENV_LABELS,
    WAITING_THRESHOLD_LABEL,
    WARM_LABEL,
    Sharing,
    Topology,
    WorkloadSpec,
)
from apps.workloads.specs.model import SERVICE_DURATION_S


def to_backend_spec(spec: Spec, priority: int) -> WorkloadSpec:
    """The simulator's / backends' view of an admitted spec; `source` keeps the spec itself for the real
    backends, which render it (the caller adds the render context).

    The max runtime is the run's limit on every backend (a run that reaches it ends TIMED_OUT). How long a
    training job's work takes is nobody's to say: the simulator draws it from its seed, within the limit for
    most runs. Inference: every pod is a worker (replicas x nodes per replica); a replica's pods are the gang;
    a service runs until cancelled (the simulator runs it SERVICE_DURATION_S), or until its max runtime stops it.
    Its engine, autoscaling range and warm weights travel as labels (the simulator serves the engine's metrics and
    times its replicas' starts from them).
    """
    labels = {KIND_LABEL: spec.kind}
    if isinstance(spec, TrainingJobSpec):
        labels.update({label: spec.env[name] for name, label in SIM_ENV_LABELS.items() if name in spec.env})
        return WorkloadSpec(
            name=spec.name,
            tenant=spec.tenant,
            queue=spec.queue,
            tier=spec.tier,
            priority=priority,
            gpu_model=spec.gpu_model,
            workers=spec.workers,
            gpus_per_worker=spec.gpus_per_worker,
            sharing=Sharing(spec.sharing.mode),
            mig_profile=spec.sharing.mig_profile,
            gpu_fraction=spec.sharing.fraction,
            gang_min=spec.gang_min,
            topology=Topology(spec.topology),
            max_runtime_s=spec.max_runtime_s,
            image=spec.image,
            command=[*spec.command, *spec.args],
            labels=labels,
            source=spec,
        )
    labels[ENGINE_LABEL] = spec.engine
    if spec.warm:
        labels[WARM_LABEL] = "1"
    scaling = spec.autoscaling
    if scaling.enabled:
        labels[MIN_REPLICAS_LABEL] = str(scaling.min_replicas)
        labels[MAX_REPLICAS_LABEL] = str(scaling.max_replicas or scaling.min_replicas)
        labels[WAITING_THRESHOLD_LABEL] = str(scaling.waiting_threshold)
    workers, per_worker, gang = spec.replicas * spec.nodes_per_replica, spec.gpus_per_pod, spec.nodes_per_replica
    if spec.disaggregation:
        # Two pools of different replica sizes as one uniform worker list: workers of the sizes' greatest common
        # divisor, so the GPUs (and the quota they count) are exactly the pools'. One pool's replica is one node.
        sizes = [spec.pool_gpus(pool) for _, pool in spec.pools()]
        per_worker, gang = math.gcd(*sizes), 1
        workers = int(spec.total_gpus) // per_worker
        labels[ENGINES_LABEL] = str(sum(pool.replicas for _, pool in spec.pools()))
    return WorkloadSpec(
        name=spec.name,
        tenant=spec.tenant,
        queue=spec.queue,
        tier=spec.tier,
        priority=priority,
        gpu_model=spec.gpu_model,
        workers=workers,
        gpus_per_worker=per_worker,
        sharing=Sharing.WHOLE,
        gang_min=gang,
        topology=Topology.ANY,
        duration_s=SERVICE_DURATION_S,
        max_runtime_s=spec.max_runtime_s,
        image=spec.image,
        command=engine_argv(spec),
        labels=labels,
        source=spec,
    )


def apply_overrides(base: dict, overrides: dict) -> dict:
    """Deep-merge `overrides` into a copy of `base`: dicts merge, lists and scalars replace, None deletes."""
    merged = copy.deepcopy(base)
    _merge(merged, overrides)
    return merged


def _merge(target: dict, overrides: dict) -> None:
    for key, value in overrides.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
