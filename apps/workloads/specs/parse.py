"""`parse_spec`: JSON-ish input to a validated spec, or one SpecError with every field's messages."""

from __future__ import annotations

from pydantic import ValidationError

from apps.backends.render.spec import Spec
from apps.core.text import N_
from apps.workloads.specs.errors import spec_error
from apps.workloads.specs.inference import InferenceServiceModel
from apps.workloads.specs.model import KINDS, SpecError
from apps.workloads.specs.training import TrainingJobModel

MODELS: dict[str, type[TrainingJobModel] | type[InferenceServiceModel]] = {
    "training": TrainingJobModel,
    "inference": InferenceServiceModel,
}
_TRAINING_FIELDS = tuple(TrainingJobModel.model_fields)
_INFERENCE_FIELDS = tuple(InferenceServiceModel.model_fields)


def parse_spec(kind: str, data: dict, catalog: dict[str, dict], gpus_per_node: int = 8) -> Spec:
    """Build a spec from JSON-ish input; raise SpecError listing every field error at once.

    `catalog` maps GPU model codes to catalog entries (memory_mib, mig_profiles, ...); `gpus_per_node` is
    the node size a gang must fit (the GPU model's nodes in the target cluster).
    """
    if kind not in KINDS:
        raise SpecError({"kind": [N_("%(value)r is not one of %(allowed)s", value=kind, allowed=", ".join(KINDS))]})
    if not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be a positive integer, not {gpus_per_node!r}")
    model = MODELS[kind]
    try:
        parsed = model.model_validate(data, context={"catalog": catalog, "gpus_per_node": gpus_per_node})
    except ValidationError as exc:
        raise spec_error(model, exc) from None
    return parsed.to_spec(gpus_per_node)
