"""Training job and inference service specs: parsing, validation, defaults and conversions.

Pure Python, no Django: the GPU model catalog is passed in (`{code: {"memory_mib", "mig_profiles", ...}}`,
as the GpuModel table holds it), so the API, the forms and templates share this one validation path and
the tests need no database. The spec types it builds are the renderers' input and live below this app, in
`apps.backends.render.spec`; they are re-exported here.

    spec = parse_spec("training", data, catalog)     # TrainingJobSpec, or SpecError with every field error
    spec.to_dict()                                   # JSON-safe; parse_spec(spec.kind, spec.to_dict(), ...) == spec
    to_backend_spec(spec, priority)                  # apps.backends.types.WorkloadSpec (with the spec as its source)
    apply_overrides(template_spec, overrides)        # deep merge for templates

Every name that becomes a Kubernetes name is a DNS-1123 label. Values that reach a command line stay
separate arguments in the renderers (never one shell string), and the few values that reach an `#SBATCH`
line or a path are restricted here to a strict character set.

Modules: `model` (the limits and SpecError), `reader` (typed access with field paths), `checks` (names,
image references, paths, env), `training` and `inference` (their fields), `parse` (`parse_spec`),
`convert` (`to_backend_spec`, `apply_overrides`).
"""

from __future__ import annotations

from apps.backends.render.spec import (
    DEFAULT_IMAGES,
    DEFAULT_PROMETHEUS,
    Autoscaling,
    Elastic,
    GpuSharing,
    InferenceServiceSpec,
    Readiness,
    SecretEnv,
    Shutdown,
    Spec,
    Toleration,
    TrainingJobSpec,
    Volume,
    Weights,
)
from apps.workloads.specs.checks import image_error, is_dns_label, path_error
from apps.workloads.specs.convert import apply_overrides, to_backend_spec
from apps.workloads.specs.model import ENGINES, KINDS, SHARING_MODES, TOPOLOGIES, SpecError
from apps.workloads.specs.parse import parse_spec

__all__ = [
    "DEFAULT_IMAGES",
    "DEFAULT_PROMETHEUS",
    "ENGINES",
    "KINDS",
    "SHARING_MODES",
    "TOPOLOGIES",
    "Autoscaling",
    "Elastic",
    "GpuSharing",
    "InferenceServiceSpec",
    "Readiness",
    "SecretEnv",
    "Shutdown",
    "Spec",
    "SpecError",
    "Toleration",
    "TrainingJobSpec",
    "Volume",
    "Weights",
    "apply_overrides",
    "image_error",
    "is_dns_label",
    "parse_spec",
    "path_error",
    "to_backend_spec",
]
