"""Backends by cluster kind, imported lazily so a deployment without Kubernetes never loads its client."""

from __future__ import annotations

from importlib import import_module

from apps.backends.base import Backend, PermanentBackendError

REGISTRY: dict[str, str] = {
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


def get_backend(cluster) -> Backend:
    return backend_class(cluster.kind)(cluster)
