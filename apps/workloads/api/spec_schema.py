"""The workload specs in the OpenAPI document: `SpecField`, a request body's `spec`, is described by the specs'
own JSON Schema (`apps.workloads.specs.json_schema`, the one the models validate with), as components
TrainingJobSpec and InferenceServiceSpec with their parts (SpecSharing, SpecVolume, ...).

drf-spectacular writes OpenAPI 3.0, whose schema objects are an older JSON Schema: the draft 2020-12 schema is
rewritten for it (null in anyOf becomes `nullable`, `const` an enum of one, a numeric `exclusiveMinimum` a
flag, `propertyNames` is left out: the server checks the names). GET /api/v1/workload-specs/{kind}/schema/
serves the draft 2020-12 schema itself.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework import serializers

from apps.workloads.specs import KINDS, json_schema

PREFIX = "Spec"  # of the nested parts' component names: SpecSharing, SpecVolume, ...
_KEEP = ("default", "enum", "const", "x-group", "required", "title", "description", "pattern")


class SpecField(serializers.DictField):
    """A training job or inference service spec: a JSON object, validated by the service (parse_spec)."""


class SpecFieldExtension(OpenApiSerializerFieldExtension):
    target_class = SpecField

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict:
        refs = []
        for name, schema in openapi_components().items():
            component = ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=schema)
            auto_schema.registry.register_on_missing(component)
            if not name.startswith(PREFIX):
                refs.append(component.ref)
        return {"oneOf": refs}


def openapi_components() -> dict[str, dict]:
    """Both kinds' schemas as OpenAPI 3.0 components, named after their titles."""
    components = {}
    for kind in KINDS:
        schema = json_schema(kind)
        defs = schema.pop("$defs", {})
        names = {ref: PREFIX + part["title"] for ref, part in defs.items()}
        components[schema["title"]] = to_openapi_30(schema, names)
        components.update({names[ref]: to_openapi_30(part, names) for ref, part in defs.items()})
    return components


def to_openapi_30(node: Any, names: dict[str, str]) -> Any:
    """A JSON Schema draft 2020-12 node as an OpenAPI 3.0 schema object; `names` maps "$defs" to components."""
    if isinstance(node, list):
        return [to_openapi_30(item, names) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: value if key in _KEEP else to_openapi_30(value, names)
        for key, value in node.items()
        if key not in ("$schema", "propertyNames")
    }
    if "properties" in node:
        out["properties"] = {name: to_openapi_30(prop, names) for name, prop in node["properties"].items()}
    if out.get("$ref", "").startswith("#/$defs/"):
        out["$ref"] = f"#/components/schemas/{names[out['$ref'].rsplit('/', 1)[1]]}"
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if isinstance(out.get("exclusiveMinimum"), int | float) and not isinstance(out["exclusiveMinimum"], bool):
        out.update(minimum=out["exclusiveMinimum"], exclusiveMinimum=True)
    alternatives = out.pop("anyOf", None)
    if alternatives is not None:
        others = [alt for alt in alternatives if alt != {"type": "null"}]
        if len(others) != 1:
            raise ValueError(f"no OpenAPI 3.0 form for anyOf {alternatives}")
        out = {**out, **others[0], **({"nullable": True} if len(others) < len(alternatives) else {})}
    if "$ref" in out and len(out) > 1:  # a $ref's siblings are ignored in OpenAPI 3.0
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    return out
