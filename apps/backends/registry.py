"""Backends by cluster kind, imported lazily so a deployment without Kubernetes never loads its client."""

from __future__ import annotations

from functools import partial, update_wrapper
from importlib import import_module

from apps.backends.base import Backend, PermanentBackendError
from apps.core.metrics import timed_call

REGISTRY: dict[str, str] = {
    "kubernetes": "apps.backends.kubernetes.backend.KubernetesBackend",
    "simulated": "apps.backends.simulator.backend.SimulatorBackend",
    "slurm": "apps.backends.slurm.backend.SlurmBackend",
}


def backend_class(kind: str) -> type[Backend]:
    path = REGISTRY.get(kind)
    if path is None:
        raise PermanentBackendError(
            f"No backend for cluster kind {kind!r} yet; available: {', '.join(sorted(REGISTRY))}"
        )
    module, _, name = path.rpartition(".")
    return getattr(import_module(module), name)


# The interface's calls, timed per cluster and operation (gpuc_backend_call_duration_seconds on /metrics).
OPERATIONS = sorted(Backend.__abstractmethods__)


def get_backend(cluster) -> Backend:
    backend = backend_class(cluster.kind)(cluster)
    for operation in OPERATIONS:
        method = getattr(backend, operation)
        # The timed call keeps the method's own signature (`__wrapped__`): callers that pass an argument only
        # some backends take (a drain's `progress`, a cordon's `by`) ask `inspect.signature` what this one takes.
        setattr(backend, operation, update_wrapper(partial(timed_call, cluster.name, operation, method), method))
    return backend
