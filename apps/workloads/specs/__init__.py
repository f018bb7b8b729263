"""Training job and inference service specs: one declaration of every field, validation, defaults, conversions.

Each kind is a pydantic model (`training.TrainingJobModel`, `inference.InferenceServiceModel`) that declares
every field once: its type, bounds, choices, default, checks, title, help text and form section. The same
models validate input, fill defaults and give the JSON Schema that the API's OpenAPI document, the submit form
and the docs describe a spec with. Pure Python, no Django: the GPU model catalog is passed in (`{code:
{"memory_mib", "mig_profiles", ...}}`, as the GpuModel table holds it) as pydantic's validation context, so the
API, the forms and templates share this one validation path and the tests need no database. The spec types
it builds are the renderers' input and live below this app, in `apps.backends.render.spec`; they are
re-exported here.

    spec = parse_spec("training", data, catalog)     # TrainingJobSpec, or SpecError with every field error
    spec.to_dict()                                   # JSON-safe; parse_spec(spec.kind, spec.to_dict(), ...) == spec
    json_schema("training")                          # the JSON Schema (draft 2020-12) of the kind
    to_backend_spec(spec, priority)                  # apps.backends.types.WorkloadSpec (with the spec as its source)
    apply_overrides(template_spec, overrides)        # deep merge for templates

Every name that becomes a Kubernetes name is a DNS-1123 label. Values that reach a command line stay
separate arguments in the renderers (never one shell string), and the few values that reach an `#SBATCH`
line or a path are restricted here to a strict character set.

Modules: `model` (the limits and SpecError), `checks` (names, image references, paths, env), `fields` (the
models' building blocks), `common`, `secret_env`, `tolerations`, `sharing`, `training` and `inference` (the
models), `errors` (pydantic's errors as field paths and messages), `parse` (`parse_spec`), `schema`
(`json_schema`), `convert` (`to_backend_spec`, `apply_overrides`).
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
from apps.workloads.specs.schema import json_schema

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
    "json_schema",
    "parse_spec",
    "path_error",
    "to_backend_spec",
]
