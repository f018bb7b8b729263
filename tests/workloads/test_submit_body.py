"""A submission's body: `submit_body` takes the usual body as it is and sends every other one through
`WorkloadSubmitSerializer`; for any body both must answer alike (the same kind and spec, or the same errors)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ValidationError

from apps.workloads.api.serializers import WorkloadSubmitSerializer, submit_body

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=12),
    st.sampled_from(["training", "inference", "Training", " training", ""]),
    st.lists(st.sampled_from(["training", 1]), max_size=2),
    st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.integers(), st.text(max_size=5)), max_size=3),
)
bodies = st.one_of(
    st.dictionaries(st.sampled_from(["kind", "spec", "name", "Kind"]), values, max_size=4),
    st.fixed_dictionaries(
        {"kind": st.sampled_from(["training", "inference"]), "spec": st.dictionaries(st.text(max_size=8), values)}
    ),
    values,
)


def _serializer(data):
    body = WorkloadSubmitSerializer(data=data)
    if body.is_valid():
        return "ok", (body.validated_data["kind"], body.validated_data["spec"])
    return "refused", body.errors


def _direct(data):
    try:
        return "ok", submit_body(data)
    except ValidationError as exc:
        return "refused", exc.detail


@settings(max_examples=400, deadline=None)
@given(bodies)
def test_the_body_is_read_as_the_serializer_reads_it(data):
    assert _direct(data) == _serializer(data)


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "training", "spec": {"name": "a"}},
        {"kind": "inference", "spec": {}},
    ],
)
def test_the_usual_body_is_taken_as_it_is(data, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the usual body needs no serializer")

    monkeypatch.setattr(WorkloadSubmitSerializer, "is_valid", refuse)
    assert submit_body(data) == (data["kind"], data["spec"])


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"kind": "training"}, "spec"),
        ({"kind": "batch", "spec": {}}, "kind"),
        ({"kind": "training", "spec": []}, "spec"),
        ({"kind": "training", "spec": {}, "specs": {}}, "specs"),
    ],
)
def test_any_other_body_gets_the_serializers_errors(data, field):
    with pytest.raises(ValidationError) as raised:
        submit_body(data)
    assert field in raised.value.detail
