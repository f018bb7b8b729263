"""Workload spec errors: English for API clients that ask for nothing, the reader's language where one is asked for.

The spec parser imports no Django; its messages are apps.core.text Texts (English strings that keep their
template), translated where they leave the service (apps/workloads/services/submission.py, the SpecError's
`translated`).
Field keys and the error `code` never change.
"""

from __future__ import annotations

import pickle

import pytest
from django.utils import translation

from apps.core.text import N_, Text, translate
from apps.workloads.specs import SpecError, parse_spec
from apps.workloads.specs.parse import _TRAINING_FIELDS as TRAINING_FIELDS
from tests.i18n.test_zh_pages import ALLOWED
from tests.i18n.visible import Data, english_words
from tests.utils.personas import fresh
from tests.workloads.conftest import build_fleet, training_spec

CATALOG = {"h100": {"memory_mib": 81920, "mig_profiles": [["1g.10gb", 1, 10], ["3g.40gb", 3, 40]]}}
# Bad in many ways at once: the message of each field is checked.
BAD = {
    "name": "Not_DNS",
    "image": "pytorch",
    "workers": 0,
    "gpus_per_worker": 1,
    "sharing": {"mode": "mig"},
    "elastic": {"min_workers": True},
    "volumes": "scratch",
    "env": {"1X": "y"},
    "colour": "red",
}


@pytest.fixture
def fleet(personas):
    return build_fleet(personas)


def post(api, user, spec, **headers):
    return api(fresh(user)).post("/api/v1/workloads/", {"kind": "training", "spec": spec}, format="json", **headers)


def test_a_text_is_its_english_sentence_and_translates_with_its_parameters():
    text = N_("must be a string, not %(type)s", type=N_("an integer"))
    assert text == "must be a string, not an integer" and isinstance(text, str)
    assert pickle.loads(pickle.dumps(text)) == text and pickle.loads(pickle.dumps(text)).params == text.params
    with translation.override("zh-hans"):
        assert translate(text) == "必须是字符串，而不是整数"
    with translation.override("en"):
        assert translate(text) == "must be a string, not an integer"
    assert translate("plain") == "plain" and translate(None) is None
    # A value from the input is never looked up in the catalog, even when it reads like a marked sentence.
    with translation.override("zh-hans"):
        assert translate(N_("unknown field; allowed: %(allowed)s", allowed="an integer")).endswith("an integer")


def test_every_message_of_a_bad_spec_is_chinese_with_the_same_fields():
    with pytest.raises(SpecError) as caught:
        parse_spec("training", {**training_spec(), **BAD}, CATALOG)
    with translation.override("en"):
        english_message, english_fields = caught.value.translated()
    assert english_message == str(caught.value) and english_fields == caught.value.fields
    assert all(isinstance(m, Text) for messages in caught.value.fields.values() for m in messages)
    with translation.override("zh-hans"):
        message, fields = caught.value.translated()
    assert fields.keys() == english_fields.keys()
    assert {"name", "image", "workers", "sharing.mig_profile", "elastic.min_workers", "volumes", "colour"} <= set(
        fields
    )
    assert message.startswith("无效的规格：colour: 未知字段；允许的字段：kind, name, ")
    data = Data({"training", "inference", "Not_DNS", "red", *TRAINING_FIELDS})
    for key, messages in fields.items():
        for chinese, english in zip(messages, english_fields[key], strict=True):
            assert chinese != english, key
            # "allowed: kind, name, tenant, ..." lists the spec's own field names: data, not prose.
            assert not english_words([chinese], data, ALLOWED), (key, chinese)


def test_api_errors_are_english_unless_the_client_asks(fleet, personas, api):
    bad = training_spec(name="Not_DNS", image="pytorch", workers=0)
    english = post(api, personas.member_a, bad)
    assert english.status_code == 400
    body = english.json()
    assert body["code"] == "invalid" and body["message"].startswith("Invalid spec: name: 'Not_DNS' is not a valid name")
    assert body["fields"]["image"] == [
        "'pytorch' has no tag or digest; pin one (e.g. :24.08-py3) so a restart runs the same image"
    ]
    chinese = post(api, personas.member_a, bad, HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9")
    assert chinese.status_code == 400
    zh = chinese.json()
    assert zh["code"] == "invalid" and zh["fields"].keys() == body["fields"].keys()
    assert zh["message"].startswith("无效的规格：name: 'Not_DNS' 不是有效的名称")
    assert zh["fields"]["workers"] == ["必须在 1 到 10000 之间，而不是 0"]
