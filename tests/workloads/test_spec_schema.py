"""The specs' JSON Schema (`apps.workloads.specs.json_schema`) comes from the models parse_spec validates with: it
lists exactly the fields parse_spec accepts, describes each one for the submit form, states the defaults
parse_spec fills, and agrees with parse_spec on what is valid.

Pure tests (no database). jsonschema is not a dependency: `schema_problems` below checks a value against the
keywords the schema uses, and the first test fails if the schema starts using one it does not know.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from apps.backends.catalog import catalog_by_code
from apps.backends.render import spec as render
from apps.workloads.specs import SpecError, json_schema, parse_spec
from apps.workloads.specs.fields import GROUPS
from tests.workloads.test_specs import ROUND_TRIP, inference, training

CATALOG = catalog_by_code()
KINDS = ("training", "inference")
BASE = {"training": training, "inference": inference}
# The renderers' dataclass of each part of a spec, and what it holds that parse_spec derives (not input).
DATACLASSES = {
    "TrainingJobSpec": render.TrainingJobSpec,
    "InferenceServiceSpec": render.InferenceServiceSpec,
    "Sharing": render.GpuSharing,
    "Elastic": render.Elastic,
    "Volume": render.Volume,
    "Toleration": render.Toleration,
    "SecretEnv": render.SecretEnv,
    "Readiness": render.Readiness,
    "Autoscaling": render.Autoscaling,
    "Shutdown": render.Shutdown,
    "Weights": render.Weights,
    "Pool": render.Pool,
    "Warm weights": render.Warm,
    "Disaggregation": render.Disaggregation,
}
DERIVED = {"fraction", "units", "gpus_per_node"}
# The form's sections, as the submit form lays them out.
SECTIONS = {
    "basics": {"kind", "name", "tenant", "queue", "tier", "cluster"},
    "container": {"image", "command", "args", "env", "secret_env"},
    "resources": {"gpu_model", "gpus_per_worker", "workers", "gang_min", "elastic", "topology", "cpu", "memory_gib"}
    | {"max_runtime_s"},
    "sharing": {"sharing"},
    "serving": {"engine", "model", "tensor_parallel", "pipeline_parallel", "data_parallel", "replicas"}
    | {"max_model_len", "gpu_memory_utilization", "port", "readiness", "autoscaling", "shutdown", "weights"}
    | {"extra_args", "routing", "disaggregation", "warm"},
    "advanced": {"tolerations", "volumes", "retries", "progress_timeout_minutes", "network"},
}
KEYWORDS = {
    *("$schema", "$defs", "$ref", "title", "description", "default", "x-group", "type", "anyOf", "enum", "const"),
    *("minimum", "maximum", "exclusiveMinimum", "maxLength", "pattern", "minItems", "maxItems", "items"),
    *("properties", "required", "additionalProperties", "maxProperties", "propertyNames"),
}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def schema_problems(schema: dict, node: dict, value: object, where: str = "") -> list[str]:
    """Where `value` breaks `node` of `schema`: the JSON Schema keywords the spec schemas use, nothing else."""
    if "$ref" in node:
        return schema_problems(schema, schema["$defs"][node["$ref"].rsplit("/", 1)[1]], value, where)
    if "anyOf" in node:
        alternatives = [schema_problems(schema, alt, value, where) for alt in node["anyOf"]]
        return [] if any(not found for found in alternatives) else [p for found in alternatives for p in found]
    kind = node.get("type")
    if kind in ("integer", "number"):
        numeric = (int,) if kind == "integer" else (int, float)
        if isinstance(value, bool) or not isinstance(value, numeric):
            return [f"{where}: not {kind}"]
    elif kind and not isinstance(value, TYPES[kind]):
        return [f"{where}: not {kind}"]
    checks = {
        "enum": lambda v, e: v in e,
        "const": lambda v, c: v == c,
        "minimum": lambda v, m: v >= m,
        "maximum": lambda v, m: v <= m,
        "exclusiveMinimum": lambda v, m: v > m,
        "maxLength": lambda v, m: len(v) <= m,
        "pattern": lambda v, p: re.search(p, v) is not None,
        "minItems": lambda v, m: len(v) >= m,
        "maxItems": lambda v, m: len(v) <= m,
        "maxProperties": lambda v, m: len(v) <= m,
        "required": lambda v, names: set(names) <= set(v),
    }
    found = [f"{where}: {key}" for key, check in checks.items() if key in node and not check(value, node[key])]
    if isinstance(value, list) and "items" in node:
        for i, item in enumerate(value):
            found += schema_problems(schema, node["items"], item, f"{where}[{i}]")
    if isinstance(value, dict):
        for key, item in value.items():
            own = node.get("properties", {}).get(key)
            extra = node.get("additionalProperties", True)
            if own is None and extra is False:
                found.append(f"{where}.{key}: not allowed")
            elif own is not None or isinstance(extra, dict):
                found += schema_problems(schema, own if own is not None else extra, item, f"{where}.{key}")
            if "propertyNames" in node:
                found += schema_problems(schema, {"type": "string", **node["propertyNames"]}, key, f"{where}.{key}")
    return found


def _nodes(node: object):
    if isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key not in ("default", "properties", "$defs", "const", "enum"):
                yield from _nodes(value)
            elif key in ("properties", "$defs"):
                for child in value.values():
                    yield from _nodes(child)
    elif isinstance(node, list):
        for item in node:
            yield from _nodes(item)


def _objects(schema: dict):
    """(name, object schema, its section) for the spec and each nested object, with its dataclass's name."""
    yield schema["title"], schema, None
    for prop in schema["properties"].values():
        for node in _nodes(prop):
            if "$ref" in node:
                nested = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
                yield nested["title"], nested, prop["x-group"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_schema_is_draft_2020_12_with_only_the_keywords_the_form_and_tests_know(kind):
    schema = json_schema(kind)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["title"] == {"training": "TrainingJobSpec", "inference": "InferenceServiceSpec"}[kind]
    used = {key for node in _nodes(schema) for key in node}
    assert used <= KEYWORDS, used - KEYWORDS
    refs = {node["$ref"] for node in _nodes(schema) if "$ref" in node}
    assert refs == {f"#/$defs/{name}" for name in schema["$defs"]}  # every part used, every reference resolves
    json_schema(kind)["properties"].clear()
    assert json_schema(kind)["properties"], "json_schema returns a copy"


# Fields to_dict keeps only when set (a stored spec from before them reads the same).
PD = {"prefill": {"replicas": 1}, "decode": {"replicas": 2, "gpus_per_replica": 2}, "transfer_backend": "nixl"}
SET_ONLY = {
    "training": {"cluster": "gpu-east", "network": "rdma"},
    "inference": {
        "cluster": "gpu-east",
        "routing": "cache-aware",
        "disaggregation": PD,
        "warm": {"claim": "hf-cache"},
        "network": "tcp",
    },
}


@pytest.mark.parametrize("kind", KINDS)
def test_the_schema_lists_exactly_the_fields_parse_spec_accepts_and_stores(kind):
    schema = json_schema(kind)
    stored = parse_spec(kind, BASE[kind](**SET_ONLY[kind]), CATALOG).to_dict()
    assert set(stored) == set(schema["properties"])  # what to_dict keeps is what the schema describes
    for name, node, _ in _objects(schema):
        fields = {f.name for f in dataclasses.fields(DATACLASSES[name])} - DERIVED
        assert fields == set(node["properties"]) - {"kind"}, name  # the renderers' input, field for field
    for field in schema["properties"]:  # each one accepted on its own, with its stored value
        assert parse_spec(kind, {**BASE[kind](), field: stored[field]}, CATALOG).to_dict()[field] == stored[field]
    with pytest.raises(SpecError) as caught:
        parse_spec(kind, {**BASE[kind](), "colour": "red"}, CATALOG)
    assert caught.value.fields["colour"][0].startswith("unknown field; allowed: " + ", ".join(schema["properties"]))


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_is_described_for_the_form(kind):
    schema = json_schema(kind)
    sections: dict[str, set] = {}
    for name, prop in schema["properties"].items():
        assert prop["x-group"] in GROUPS, name
        sections.setdefault(prop["x-group"], set()).add(name)
    assert all(fields <= SECTIONS[group] for group, fields in sections.items()), sections
    for name, node, group in _objects(schema):
        for field, prop in node["properties"].items():
            where = f"{name}.{field}"
            assert prop["title"] and prop["description"] and prop["x-group"] == (group or prop["x-group"]), where
            assert ("default" in prop) != (field in node.get("required", ())), where
            for typed in [prop, *prop.get("anyOf", [])]:
                bounded = {
                    "integer": {"minimum", "maximum"},
                    "number": {"exclusiveMinimum", "maximum"},
                    "array": {"maxItems"},
                }.get(typed.get("type"), set())
                assert bounded <= set(typed), where
                if typed.get("type") == "string":
                    assert {"maxLength", "enum", "const"} & set(typed), where
                if typed.get("type") == "object" and "$ref" not in typed:
                    assert "maxProperties" in typed, where


@pytest.mark.parametrize("kind", KINDS)
def test_the_defaults_are_what_parse_spec_fills_in(kind):
    schema = json_schema(kind)
    given = BASE[kind]()
    defaults = {name: prop["default"] for name, prop in schema["properties"].items() if name not in given}
    assert defaults, "a base spec with every field given tests nothing"
    assert parse_spec(kind, {**given, **defaults}, CATALOG) == parse_spec(kind, given, CATALOG)


@pytest.mark.parametrize(("kind", "data"), ROUND_TRIP)
def test_stored_specs_are_valid_against_the_schema(kind, data):
    stored = parse_spec(kind, data, CATALOG).to_dict()
    schema = json_schema(kind)
    assert schema_problems(schema, schema, stored) == []


# One rule of the schema broken each (a bound, a choice, a pattern, a length, an unknown field): parse_spec
# refuses the same spec at the same field.
BROKEN = [
    ("training", {"workers": 0}, "workers"),
    ("training", {"workers": "4"}, "workers"),
    ("training", {"retries": 101}, "retries"),
    ("training", {"topology": "ring"}, "topology"),
    ("training", {"name": "Not_DNS"}, "name"),
    ("training", {"name": "a" * 64}, "name"),
    ("training", {"command": []}, "command"),
    ("training", {"args": ["x"] * 257}, "args"),
    ("training", {"env": {"1A": "x"}}, "env.1A"),
    ("training", {"env": {"A": 1}}, "env.A"),
    ("training", {"sharing": {"mode": "vgpu"}}, "sharing.mode"),
    ("training", {"sharing": {"mode": "mps", "replicas": 65}, "gpus_per_worker": 1}, "sharing.replicas"),
    ("training", {"sharing": {"mode": "time-slice", "replicas": 1}, "gpus_per_worker": 1}, "sharing.replicas"),
    ("training", {"volumes": [{"claim": "d", "mount_path": "/d", "read_only": "yes"}]}, "volumes[0].read_only"),
    ("training", {"volumes": [{"mount_path": "/d"}]}, "volumes[0].claim"),
    ("training", {"elastic": {"min_workers": 1, "max_workers": 2}}, "elastic.checkpoint_path"),
    ("training", {"tolerations": [{"key": "a", "effect": "Never"}]}, "tolerations[0].effect"),
    ("training", {"secret_env": [{"name": "1A", "secret": "s", "key": "k"}]}, "secret_env[0].name"),
    ("training", {"colour": "red"}, "colour"),
    ("inference", {"engine": "tgi"}, "engine"),
    ("inference", {"gpu_memory_utilization": 0}, "gpu_memory_utilization"),
    ("inference", {"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ("inference", {"port": 65536}, "port"),
    ("inference", {"max_model_len": 8}, "max_model_len"),
    ("inference", {"readiness": {"period_s": 0}}, "readiness.period_s"),
    ("inference", {"autoscaling": {"enabled": "yes"}}, "autoscaling.enabled"),
    ("inference", {"weights": {"mount_path": "/models"}}, "weights.claim"),
    ("inference", {"extra_args": ["--x"] * 65}, "extra_args"),
    ("inference", {"kind": "training"}, "kind"),
]


@pytest.mark.parametrize(("kind", "overrides", "field"), BROKEN)
def test_the_schema_and_parse_spec_refuse_the_same_specs(kind, overrides, field):
    data = {**BASE[kind](), **overrides}
    schema = json_schema(kind)
    assert schema_problems(schema, schema, data), "the schema lets it by"
    with pytest.raises(SpecError) as caught:
        parse_spec(kind, data, CATALOG)
    assert field in caught.value.fields, caught.value.fields
