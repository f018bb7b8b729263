"""Rendering: pure functions from the console's typed values to each backend's own terms, in one package.

Quota (the desired state of one cluster, `desired.DesiredState`, which tenancy builds from its tables):

    render(state, "kubernetes")  -> RenderResult (objects for server-side apply + caveats)
    render(state, "slurm")       -> SlurmRender (sacctmgr argument vectors + caveats)
    caveats_for(kind, queueing)  -> what that backend cannot express, without rendering

Workloads (a `spec.TrainingJobSpec` / `spec.InferenceServiceSpec`, which the workloads app parses user
input into, and the context it runs in): `apps.backends.render.workload`.

Both kinds of result have a `text` for previews. Nothing here touches the database or a cluster: callers
pass everything in, and each backend applies what its renderer returns (`Backend.render`, `submit`,
`push_quota`). `apps.backends.render.validate` checks rendered objects strictly (built-ins per Kubernetes
version, custom objects against the vendored CRDs in `crds/`, plus the CEL and webhook rules we rely on);
the Kubernetes backend runs it before it applies anything.
"""

from __future__ import annotations

from apps.backends.render.caveats import caveats_for
from apps.backends.render.desired import DesiredState
from apps.backends.render.errors import RenderError
from apps.backends.render.kubernetes import render_kubernetes
from apps.backends.render.result import RenderResult
from apps.backends.render.slurm import SlurmRender, render_slurm

KINDS = ("kubernetes", "slurm")

__all__ = [
    "KINDS",
    "RenderError",
    "RenderResult",
    "SlurmRender",
    "caveats_for",
    "render",
    "render_kubernetes",
    "render_slurm",
]


def render(state: DesiredState, kind: str) -> RenderResult | SlurmRender:
    """Render `state` for a backend kind; Kubernetes picks Kueue or Volcano from `state.queueing`."""
    if kind == "kubernetes":
        return render_kubernetes(state)
    if kind == "slurm":
        return render_slurm(state)
    raise ValueError(f"kind: {kind!r} is not one of {', '.join(repr(k) for k in KINDS)}")
