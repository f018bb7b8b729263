"""The inference spec's warm weights (`warm: {claim}`, docs/inference.md: warm starts): what it accepts, each refusal
at its field, the label the simulator times replicas by, and the JSON Schema the submit form is generated from."""

from __future__ import annotations

import pytest

from apps.backends.types import WARM_LABEL
from apps.workloads.specs import json_schema, parse_spec
from apps.workloads.specs.convert import to_backend_spec
from tests.workloads.test_specs import CATALOG, errors, inference


def test_warm_weights_name_a_claim_and_travel_to_the_backends():
    spec = parse_spec("inference", inference(warm={"claim": "hf-cache"}), CATALOG)
    assert spec.warm.claim == "hf-cache" and spec.to_dict()["warm"] == {"claim": "hf-cache"}
    assert to_backend_spec(spec, 1000).labels[WARM_LABEL] == "1"
    plain = parse_spec("inference", inference(), CATALOG)
    assert plain.warm is None and "warm" not in plain.to_dict()  # a stored spec from before reads the same
    assert WARM_LABEL not in to_backend_spec(plain, 1000).labels


@pytest.mark.parametrize(
    ("overrides", "path", "message"),
    [
        ({"warm": {"claim": "Not_A_Claim"}}, "warm.claim", "is not a valid PersistentVolumeClaim name"),
        ({"warm": {}}, "warm.claim", "required"),
        ({"warm": {"claim": "c", "mount_path": "/x"}}, "warm.mount_path", "unknown field"),
        (
            {"warm": {"claim": "c"}, "model": "/models/llama", "weights": {"claim": "w", "mount_path": "/models"}},
            "warm",
            "warm downloads a Hugging Face model id (org/name); '/models/llama' is a path on a volume",
        ),
        (
            {"warm": {"claim": "c"}, "weights": {"claim": "w"}},
            "warm",
            "the engine reads its weights from one claim",
        ),
    ],
)
def test_refusals_name_the_field(overrides, path, message):
    found = errors("inference", inference(**overrides))
    assert path in found and any(message in text for text in found[path]), found


def test_the_form_offers_it_in_the_serving_section():
    schema = json_schema("inference")
    warm = schema["properties"]["warm"]
    assert warm["x-group"] == "serving" and warm["default"] is None
    claim = schema["$defs"]["WarmModel"]["properties"]["claim"]
    assert claim["pattern"] and claim["maxLength"] == 63
