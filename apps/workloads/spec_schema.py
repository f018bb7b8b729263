"""The JSON Schema the submit form is generated from: the API's own (`apps.workloads.specs.json_schema`)."""

from __future__ import annotations


def schema_for(kind: str) -> dict:
    """The JSON Schema of `kind` ("training" or "inference"): pydantic's model_json_schema of the spec model, the
    one the API validates with and the OpenAPI document describes, so the form cannot drift from the API."""
    from apps.workloads.specs import json_schema

    return json_schema(kind)
