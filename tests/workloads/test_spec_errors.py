"""How parse_spec reports what is wrong: every problem at once, checks between fields included, and every pydantic
error as one of the specs' own messages (apps/workloads/specs/errors.py), never a bare "invalid".

Pure tests (no database).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.backends.catalog import catalog_by_code
from apps.workloads.specs import SpecError, json_schema, parse_spec
from tests.workloads.test_specs import inference, training

CATALOG = catalog_by_code()
BASE = {"training": training, "inference": inference}


def fields_of(kind: str, data: object) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse_spec(kind, data, CATALOG)
    return caught.value.fields


@pytest.mark.parametrize(
    ("kind", "overrides", "expected"),
    [
        # A check between fields runs when the fields it compares are valid, whatever else is wrong.
        ("training", {"name": "Bad!", "workers": 3, "gang_min": 5}, {"name", "gang_min"}),
        ("training", {"image": "x y", "gpus_per_worker": 9}, {"image", "gpus_per_worker"}),
        (
            "training",
            {
                "env": {"1A": "x"},
                "workers": 9,
                "elastic": {"min_workers": 2, "max_workers": 8, "checkpoint_path": "/c"},
            },
            {"env.1A", "workers"},
        ),
        (
            "training",
            {"retries": -1, "sharing": {"mode": "mig", "mig_profile": "9g.99gb"}},
            {"retries", "sharing.mig_profile"},
        ),
        ("training", {"volumes": "x", "topology": "node"}, {"volumes", "topology"}),
        ("inference", {"queue": "Q", "tensor_parallel": 12}, {"queue", "tensor_parallel"}),
        ("inference", {"cpu": 0, "engine": "sglang", "tensor_parallel": 16, "port": 20000}, {"cpu", "port"}),
        ("inference", {"tier": "T", "extra_args": ["--port=1"]}, {"tier", "extra_args[0]"}),
        (
            "inference",
            {"colour": 1, "autoscaling": {"enabled": True, "min_replicas": 2, "max_replicas": 4}},
            {"colour", "replicas"},
        ),
        ("inference", {"max_model_len": 1, "model": "/data/x", "weights": {"claim": "w"}}, {"max_model_len", "model"}),
    ],
)
def test_every_problem_is_reported_at_once(kind, overrides, expected):
    assert set(fields_of(kind, {**BASE[kind](), **overrides})) == expected


def test_a_refused_env_name_is_its_entrys_only_message():
    assert fields_of("training", training(env={"1A": 5})) == {
        "env.1A": ["'1A' is not a variable name: letters, digits and '_', not starting with a digit"]
    }


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats() | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


def _leaves(kind: str) -> list[tuple[str, str | None, bool]]:
    """(field, nested field or None, whether the field is a list of objects) for every field of the schema."""
    schema = json_schema(kind)
    out: list[tuple[str, str | None, bool]] = []
    for field, prop in schema["properties"].items():
        out.append((field, None, False))
        text = json.dumps(prop)
        for name, part in schema["$defs"].items():
            if f'"#/$defs/{name}"' in text:
                out += [(field, inner, prop.get("type") == "array") for inner in part["properties"]]
    return out


LEAVES = [(kind, *leaf) for kind in ("training", "inference") for leaf in _leaves(kind)]


@settings(max_examples=600, deadline=None)
@given(leaf=st.sampled_from(LEAVES), value=JSON)
def test_any_json_value_in_any_field_gets_one_of_the_specs_messages(leaf, value):
    """Whatever JSON a field (or a field of a nested object) holds, parse_spec accepts it or names the field
    with a message of its own: pydantic's error types are all mapped."""
    kind, field, inner, listed = leaf
    spec = BASE[kind]()
    if inner is None:
        spec[field] = value
    else:
        spec[field] = [{inner: value}] if listed else {inner: value}
    try:
        parse_spec(kind, spec, CATALOG)
    except SpecError as error:
        messages = [message for found in error.fields.values() for message in found]
        assert messages and "invalid" not in messages, error.fields
        assert all(path.split(".")[0].split("[")[0] in json_schema(kind)["properties"] for path in error.fields)
