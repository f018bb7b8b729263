"""The submit form generated from a spec's JSON Schema (apps/workloads/schema_form.py), and its way back.

The schemas are the API's own, `apps.workloads.specs.json_schema(kind)` (pydantic's model_json_schema, draft
2020-12: `$defs`/`$ref`, optional fields as anyOf with null, "x-group" per property), so a field added to the spec
models is tested here too; `test_the_page_uses_the_api_schema` ties the page to the function.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.workloads.schema_form import GROUPS, SchemaForm, place_errors
from apps.workloads.specs import json_schema


def schema(kind: str) -> dict:
    return json_schema(kind)


def by_name(form: SchemaForm) -> dict:
    return {f.name: f for top in form.fields() for f in top.walk()}


@pytest.mark.parametrize("kind", ["training", "inference"])
def test_every_property_of_the_schema_has_its_input(kind):
    """Generated, not written: each top-level property is a field of its x-group, each nested property a field of its
    fieldset or row; nothing of the schema is left out (so the form and the API cannot drift)."""
    raw = schema(kind)
    form = SchemaForm(raw)
    fields = by_name(form)
    for name, prop in raw["properties"].items():
        assert name in fields, name
        assert fields[name].group == prop["x-group"]
        ref = prop.get("$ref") or next((o.get("$ref") for o in prop.get("anyOf", []) if "$ref" in o), None) or ""
        items = prop.get("items", {}).get("$ref", "")
        for nested in raw["$defs"].get(ref.rsplit("/", 1)[-1], {}).get("properties", {}):
            assert f"{name}.{nested}" in fields, f"{name}.{nested}"
        for nested in raw["$defs"].get(items.rsplit("/", 1)[-1], {}).get("properties", {}):
            assert f"{name}.0.{nested}" in fields, f"{name}.0.{nested}"
    sections = [s.key for s in form.sections()]
    assert sections == [g for g in GROUPS if g in sections]


def test_each_type_gets_its_input():
    fields = by_name(SchemaForm(schema("training")))
    workers = fields["workers"]
    assert (workers.widget, workers.minimum, workers.maximum, workers.step) == ("number", 1, 10000, "1")
    assert workers.label == "Workers" and workers.help.startswith("Pods or Slurm nodes")
    assert workers.placeholder == "1"  # the default, shown: empty means the default applies
    gang = fields["gang_min"]  # optional: anyOf integer/null, bounds inside the integer branch
    assert (gang.widget, gang.minimum, gang.maximum) == ("number", 1, 10000)
    assert fields["topology"].widget == "select" and fields["topology"].choices[0] == ("any", "any")
    assert fields["sharing"].widget == "fieldset" and fields["sharing.mode"].widget == "select"
    assert fields["sharing.replicas"].minimum == 2
    assert fields["elastic"].widget == "fieldset"
    assert not fields["elastic.min_workers"].required  # required only once the optional object is given
    assert fields["command"].widget == "lines" and fields["command"].required
    assert fields["env"].widget == "keyvalue"
    assert fields["secret_env"].widget == "rows" and fields["secret_env.0.secret"].widget == "text"
    assert fields["volumes.0.read_only"].widget == "checkbox"
    assert fields["tolerations.1.operator"].widget == "select"
    inference = by_name(SchemaForm(schema("inference")))
    assert inference["gpu_memory_utilization"].step == "any"
    assert inference["autoscaling.enabled"].widget == "checkbox"
    assert inference["readiness"].widget == "fieldset" and inference["weights.claim"].widget == "text"


def test_choices_replace_free_text_and_skipped_fields_are_not_shown():
    form = SchemaForm(schema("training"), choices={"queue": [("a/train", "a/train")]}, skip=("kind", "tenant"))
    fields = by_name(form)
    assert fields["queue"].widget == "select" and fields["queue"].choices == [("a/train", "a/train")]
    assert "kind" not in fields and "tenant" not in fields


FULL = {
    "name": "pretrain",
    "queue": "train",
    "image": "nvcr.io/nvidia/pytorch:24.08-py3",
    "command": ["python", "train.py"],
    "args": ["--lr", "3e-4"],
    "env": {"NCCL_DEBUG": "INFO", "EMPTY": "", "URL": "http://x/?a=b"},
    "secret_env": [{"name": "HF_TOKEN", "secret": "hf", "key": "token"}],
    "gpu_model": "h100",
    "workers": 4,
    "gpus_per_worker": 8,
    "topology": "leaf",
    "elastic": {"min_workers": 2, "max_workers": 8, "checkpoint_path": "/ckpt"},
    "max_runtime_s": 7200,
    "sharing": {"mode": "whole"},
    "retries": 0,
    "volumes": [{"claim": "data", "mount_path": "/data", "read_only": True}, {"claim": "ckpt", "mount_path": "/ckpt"}],
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
}


def test_spec_to_form_to_spec_keeps_every_field():
    form = SchemaForm(schema("training"))
    data = form.data_from_spec(FULL)
    assert data["command"] == "python\ntrain.py" and data["env"] == "NCCL_DEBUG=INFO\nEMPTY=\nURL=http://x/?a=b"
    assert data["secret_env.0.name"] == "HF_TOKEN" and data["volumes.0.read_only"] == "on"
    assert "volumes.1.read_only" not in data  # false: the default, an unchecked box
    spec, errors = SchemaForm(schema("training"), data).spec()
    assert errors == {}
    assert spec == FULL
    # ... and back to the same form data.
    assert SchemaForm(schema("training")).data_from_spec(spec) == data


def test_empty_fields_are_left_out_so_that_defaults_apply():
    data = {
        "name": "x",
        "workers": "",
        "gang_min": " ",
        "topology": "",
        "env": "\n",
        "command": "python\n\n",
        "sharing.mode": "",
        "elastic.min_workers": "",
        "secret_env.0.name": "",
        "secret_env.0.secret": "",
        "secret_env.0.key": "",
        "volumes.0.read_only": "",
    }
    spec, errors = SchemaForm(schema("training"), data).spec()
    assert (spec, errors) == ({"name": "x", "command": ["python"]}, {})


def test_what_cannot_be_read_is_reported_at_its_input():
    data = {"workers": "two", "env": "GOOD=1\nno equals sign", "gang_min": "1.5", "sharing.gpucores": "x"}
    spec, errors = SchemaForm(schema("training"), data).spec()
    assert errors == {
        "workers": ["Not a whole number."],
        "env": ["Line 2: write KEY=VALUE."],
        "gang_min": ["Not a whole number."],
        "sharing.gpucores": ["Not a whole number."],
    }
    assert spec == {"env": {"GOOD": "1"}}
    spec, errors = SchemaForm(schema("inference"), {"gpu_memory_utilization": "0.85"}).spec()
    assert spec == {"gpu_memory_utilization": 0.85} and not errors
    assert SchemaForm(schema("inference"), {"gpu_memory_utilization": "nan"}).spec()[1]


def test_a_checkbox_whose_default_is_true_says_false_when_unchecked():
    raw = {
        "type": "object",
        "properties": {"on": {"type": "boolean", "default": True, "title": "On"}, "off": {"type": "boolean"}},
    }
    assert SchemaForm(raw, {}).spec() == ({"on": False}, {})
    assert SchemaForm(raw, {"on": "on", "off": "on"}).spec() == ({"on": True, "off": True}, {})


def test_rows_grow_with_the_data():
    fields = by_name(SchemaForm(schema("training"), {"secret_env.3.name": "A"}))
    assert "secret_env.5.name" in fields and "secret_env.6.name" not in fields  # 4 used + 2 empty


def test_errors_by_spec_path_land_on_the_inputs():
    names = SchemaForm(schema("training"), {"volumes.0.claim": "x"}).field_names()
    placed, general = place_errors(
        {
            "workers": ["too many"],
            "sharing.mig_profile": ["unknown profile"],
            "env.FOO": ["reserved"],
            "volumes[0].claim": ["not a label"],
            "command[0]": ["empty"],
            "extra_args[1]": ["set by the console"],
            "spec": ["invalid"],
        },
        names,
    )
    assert placed == {
        "workers": ["too many"],
        "sharing.mig_profile": ["unknown profile"],
        "env": ["reserved"],
        "volumes.0.claim": ["not a label"],
        "command": ["empty"],
    }
    assert general == ["extra_args[1]: set by the console", "invalid"]


words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=12)
names = st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True)


@settings(max_examples=80, deadline=None)
@given(
    workers=st.one_of(st.none(), st.integers(1, 10000)),
    command=st.lists(words.filter(lambda w: w.strip() == w), min_size=1, max_size=4),
    env=st.dictionaries(names, st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=10).map(str.strip)),
    topology=st.one_of(st.none(), st.sampled_from(["any", "node", "nvlink", "leaf"])),
    read_only=st.booleans(),
)
def test_round_trip_over_generated_specs(workers, command, env, topology, read_only):
    spec = {"name": "gen", "command": command}
    for key, value in (("workers", workers), ("topology", topology)):
        if value is not None:
            spec[key] = value
    if env:
        spec["env"] = env
    spec["volumes"] = [{"claim": "data", "mount_path": "/data", **({"read_only": True} if read_only else {})}]
    data = SchemaForm(schema("training")).data_from_spec(spec)
    assert SchemaForm(schema("training"), data).spec() == (spec, {})


def test_the_page_uses_the_api_schema():
    """The page's form is generated from the API's schema, not a copy of it."""
    from apps.workloads.spec_schema import schema_for

    for kind in ("training", "inference"):
        assert schema_for(kind) == json_schema(kind)
