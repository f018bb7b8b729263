"""Stored English (admission and workload reasons, workload events, incident titles) reads in Chinese on pages.

The texts stay English where they are stored (the API, reasons.py's categories); apps/core/stored_text.py
recognises the template that made one and translates it. These tests build every template's text the way
the code does, and check it is recognised as that template, reads in Chinese without English words and is
left alone for English readers; texts no template made (a backend's reason) are shown as stored.
"""

from __future__ import annotations

import re

import pytest
from django.utils import translation

from apps.core import stored_text
from apps.core.stored_text import recognise, registry, translate_stored
from apps.health.rules import DEFAULT_RULES
from apps.observability.reasons import CAPACITY, POLICY, QUOTA, reason_category
from apps.tenancy import admission
from apps.workloads import reasons as workload_reasons
from tests.i18n.test_zh_pages import ALLOWED
from tests.i18n.visible import Data, english_words

PLACEHOLDER = re.compile(r"%\((\w+)\)s")
# Data the samples put in (names of things, a backend's own words), removed before looking for English.
SAMPLE_DATA = {"NVIDIA H100 80GB", "alice", "backend says no", "game day", "gpu-07", "acme-llm/train", "training"}


def all_templates() -> list[str]:
    return [text for module in stored_text.sources() for text in module.STORED_TEMPLATES]


def sample_param(name: str) -> str:
    """A value like the code puts in `name`: a number, a code, a nested reason, a default rule's title, data."""
    reg = registry()
    if name in reg.labels:
        return {"decision": "queue", "backend_state": "pending"}.get(name, "running")
    if name == "head":
        return admission.HEAD % {"gpus": "8 × NVIDIA H100 80GB", "free": 0}
    if name == "why":
        return admission.LENDERS_AT_LIMIT
    if name in ("rule", "title"):
        return DEFAULT_RULES[0].title
    if name == "reason":
        return admission.WITHIN_GUARANTEE % {"used": 8, "guaranteed": 16}
    shapes = {
        "node": "gpu-07",
        "model": "NVIDIA H100 80GB",
        "gpus": "8 × NVIDIA H100 80GB",
        "user": "alice",
        "queue": "acme-llm/train",
        "tier": "training",
        "error": "backend says no",
        "cluster": "gpu-07",
        "backend_id": "wl12-x",
        "fault": "game day",
        "kind": "health.cordon",
        "start": "2026-12-01 14:05 UTC",
        "clusters": "gpu-07 16, gpu-07 3/7",
    }
    return shapes.get(name, "3")


def sample(template: str) -> str:
    return template % {name: sample_param(name) for name in PLACEHOLDER.findall(template)}


@pytest.mark.parametrize("template", all_templates())
def test_every_template_is_recognised_and_reads_in_chinese(template):
    text = sample(template)
    assert recognise(text)[0] == template, (text, recognise(text))
    with translation.override("zh-hans"):
        chinese = translate_stored(text)
    assert chinese != text
    left = english_words([chinese], Data(SAMPLE_DATA), ALLOWED)
    assert not left, (text, chinese, left)
    with translation.override("en"):
        assert translate_stored(text) == text


def test_nested_reasons_are_split_where_they_were_joined():
    reclaiming = admission.RECLAIMING % {"head": sample_param("head"), "lent": 3, "amount": 3}
    text = workload_reasons.REQUEUED_AFTER_PREEMPTION % {"reason": admission.VICTIMS_TAKEN % {"reason": reclaiming}}
    with translation.override("zh-hans"):
        chinese = translate_stored(text)
    assert (
        chinese
        == "被抢占后重新排队：需要 8 × NVIDIA H100 80GB；保障内空闲 0；已出借 3：正在回收 3（被抢占的负载已在回收中）"
    )
    event = workload_reasons.STATE_CHANGED_WHY % {"from_state": "pending", "to_state": "admitted", "reason": text}
    with translation.override("zh-hans"):
        assert translate_stored(event).startswith("排队中 → 已准入：被抢占后重新排队：需要 8 ×")


@pytest.mark.parametrize(
    "text",
    [
        "0/4 nodes are available: 4 Insufficient nvidia.com/gpu on node gpu-07",  # a backend's reason with "on"
        "needs 4 × 8 h100 on one leaf; largest fit is 2",  # the simulator's own words
        "My own rule on gpu-07",  # a custom rule's title: not a default one
        "needs 8 × H100; 0 free within guarantee; borrowing blocked: lenders at th",  # cut at its column's length
        "",
    ],
)
def test_texts_no_template_made_are_shown_as_stored(text):
    with translation.override("zh-hans"):
        assert translate_stored(text) == text


def test_the_categories_still_read_the_english_reasons():
    """Reasons stay English where they are stored, so apps/observability/reasons.py keeps sorting them."""
    head = sample_param("head")
    assert reason_category(admission.BORROWING_BLOCKED % {"head": head, "why": admission.NO_LENDER}) == QUOTA
    capacity = admission.NO_CAPACITY % {"head": head, "capacity": 1, "model": "NVIDIA H100 80GB"}
    assert reason_category(capacity) == CAPACITY
    assert reason_category(admission.AT_USER_CAP % {"user": "alice", "used": 8, "cap": 8}) == POLICY
    assert reason_category(workload_reasons.REQUEUED_AFTER_PREEMPTION % {"reason": admission.BEHIND}) == QUOTA


def test_a_template_needs_its_parameters_shaped():
    """Numbers and codes match only numbers and codes, so a text is not split in the middle of a phrase."""
    text = admission.RECLAIMING % {"head": sample_param("head"), "lent": 3, "amount": 3}
    template, params = recognise(text)
    assert template == admission.RECLAIMING and params["head"] == sample_param("head") and params["lent"] == "3"


def test_each_app_registers_its_templates():
    """Core names no app: the apps that make stored English register their modules in AppConfig.ready."""
    from apps.health import rules
    from apps.tenancy import placement

    assert set(stored_text.sources()) == {admission, placement, workload_reasons, rules}
