"""The workload specs' schema in the API: GET /api/v1/workload-specs/{kind}/schema/ serves json_schema(kind), and
the OpenAPI document describes the `spec` of a submission and of a template with the same schema, rewritten for
OpenAPI 3.0 (apps/workloads/api/spec_schema.py)."""

from __future__ import annotations

import pytest

from apps.workloads.api.spec_schema import to_openapi_30
from apps.workloads.specs import json_schema
from tests.routes.matrix import openapi_schema
from tests.utils.personas import fresh

COMPONENTS = {"training": "TrainingJobSpec", "inference": "InferenceServiceSpec"}
# Draft 2020-12 keywords OpenAPI 3.0's schema objects do not have.
NOT_OPENAPI_30 = {"$defs", "$schema", "const", "anyOf", "propertyNames", "patternProperties", "prefixItems"}


def _keys(node: object, parent: str = ""):
    if isinstance(node, dict):
        for key, value in node.items():
            if parent != "properties":  # a property's name is not a keyword
                yield key
            if key not in ("default", "enum", "example"):
                yield from _keys(value, key)
    elif isinstance(node, list):
        for item in node:
            yield from _keys(item, parent)


@pytest.mark.parametrize("kind", ["training", "inference"])
def test_any_signed_in_user_reads_a_kinds_schema(personas, api, kind):
    response = api(fresh(personas.viewer_a)).get(f"/api/v1/workload-specs/{kind}/schema/")
    assert response.status_code == 200, response.content
    assert response.json() == json_schema(kind)
    assert api().get(f"/api/v1/workload-specs/{kind}/schema/").status_code == 401


def test_an_unknown_kind_has_no_schema(personas, api):
    response = api(fresh(personas.viewer_a)).get("/api/v1/workload-specs/batch/schema/")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert response.json()["fields"] == {"kind": ["Not found."]}


def test_the_openapi_document_describes_the_spec_of_a_submission_and_a_template():
    schemas = openapi_schema()["components"]["schemas"]
    both = [{"$ref": f"#/components/schemas/{name}"} for name in COMPONENTS.values()]
    assert schemas["WorkloadSubmitRequest"]["properties"]["spec"]["oneOf"] == both
    assert schemas["TemplateSaveRequest"]["properties"]["spec"]["oneOf"] == both
    for kind, name in COMPONENTS.items():
        component, source = schemas[name], json_schema(kind)
        assert list(component["properties"]) == list(source["properties"])
        assert component["required"] == source["required"] and component["additionalProperties"] is False
        for field, prop in component["properties"].items():
            own = source["properties"][field]
            assert (prop["title"], prop["description"], prop["x-group"]) == (
                own["title"],
                own["description"],
                own["x-group"],
            ), field
            assert prop.get("default") == own.get("default"), field
    spec_parts = {
        name: part for name, part in schemas.items() if name.startswith("Spec") or name in COMPONENTS.values()
    }
    assert {"SpecSharing", "SpecVolume", "SpecElastic", "SpecToleration", "SpecSecretEnv", "SpecWeights"} <= set(
        spec_parts
    )
    assert not set(_keys(spec_parts)) & NOT_OPENAPI_30


def test_draft_2020_12_forms_become_their_openapi_30_forms():
    names = {"Weights": "SpecWeights"}
    nullable_int = {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 9}, {"type": "null"}], "default": None}
    assert to_openapi_30(nullable_int, names) == {
        "type": "integer",
        "minimum": 1,
        "maximum": 9,
        "nullable": True,
        "default": None,
    }
    nullable_object = {"anyOf": [{"$ref": "#/$defs/Weights"}, {"type": "null"}], "title": "Weights volume"}
    assert to_openapi_30(nullable_object, names) == {
        "allOf": [{"$ref": "#/components/schemas/SpecWeights"}],
        "title": "Weights volume",
        "nullable": True,
    }
    assert to_openapi_30({"const": "training", "type": "string"}, names) == {"enum": ["training"], "type": "string"}
    assert to_openapi_30({"type": "number", "exclusiveMinimum": 0, "maximum": 1}, names) == {
        "type": "number",
        "minimum": 0,
        "exclusiveMinimum": True,
        "maximum": 1,
    }
    env = {"type": "object", "propertyNames": {"pattern": "^A$"}, "additionalProperties": {"type": "string"}}
    assert to_openapi_30(env, names) == {"type": "object", "additionalProperties": {"type": "string"}}
    with pytest.raises(ValueError, match=r"no OpenAPI 3\.0 form"):
        to_openapi_30({"anyOf": [{"type": "integer"}, {"type": "string"}]}, names)
