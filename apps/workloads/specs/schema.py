"""`json_schema(kind)`: the JSON Schema (draft 2020-12) of a spec, generated from its model: what the API's
OpenAPI document, the submit form and docs/api.md describe a spec with."""

from __future__ import annotations

import copy
import functools

from apps.workloads.specs.parse import MODELS

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def json_schema(kind: str) -> dict:
    """The schema of `kind` ("training" or "inference"). Every property has a title, a description, its default
    where it has one, its bounds and choices (minimum/maximum, enum, maxLength, maxItems) and "x-group", the
    submit form's section it belongs to (apps.workloads.specs.fields.GROUPS); a nested object's properties are
    in their parent's section. Shared parts are in "$defs". A fresh copy: the caller may change it."""
    return copy.deepcopy(_schema(kind))


@functools.cache
def _schema(kind: str) -> dict:
    model = MODELS[kind]
    schema = {"$schema": DIALECT, **model.model_json_schema()}
    for name, prop in schema["properties"].items():
        prop.setdefault("title", model.model_fields[name].title)  # pydantic drops it when the object's is the same
        if "patternProperties" in prop:  # env: pydantic puts the names' pattern there, which lets other names by
            ((pattern, values),) = prop.pop("patternProperties").items()
            prop.update(
                additionalProperties=values, propertyNames={**prop.get("propertyNames", {}), "pattern": pattern}
            )
        for ref in _refs(prop):
            for nested in schema["$defs"][ref]["properties"].values():
                nested.setdefault("x-group", prop["x-group"])
    return schema


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else []
        return own + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    return []
