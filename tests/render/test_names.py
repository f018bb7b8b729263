"""Name rules: DNS-1123 checks and the deterministic shortening of derived names."""

from __future__ import annotations

import pytest

from apps.backends.render.desired import QueueSpec
from apps.backends.render.names import dns_label, is_dns_label, is_label_value, is_qualified_name


@pytest.mark.parametrize("name", ["a", "team-a", "a1", "1a", "x" * 63])
def test_valid_labels_are_kept_as_they_are(name):
    assert is_dns_label(name) and dns_label(name) == name


@pytest.mark.parametrize("name", ["x" * 64, "Team-A", "team_a", "-a", "a-", "a.b", "", "tëam", "a b", "team\n"])
def test_invalid_labels_become_valid_deterministic_and_distinct(name):
    label = dns_label(name)
    assert is_dns_label(label)
    assert label == dns_label(name)
    assert label != dns_label(name + "x")


def test_long_full_names_keep_a_readable_prefix_and_a_hash():
    queue = QueueSpec(tenant="research-" + "v" * 54, name="training-" + "q" * 54)
    label = dns_label(queue.full_name)
    assert len(queue.full_name) > 63 and len(label) == 63
    assert label.startswith("research-vvvv")
    assert label[-9] == "-" and all(c in "0123456789abcdef" for c in label[-8:])


def test_names_sharing_a_long_prefix_stay_distinct():
    a, b = "p" * 70 + "-a", "p" * 70 + "-b"
    assert dns_label(a)[:54] == dns_label(b)[:54]
    assert dns_label(a) != dns_label(b)


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("gpu-console/tenant", True),
        ("nvidia.com/gpu-h100", True),
        ("app.kubernetes.io/managed-by", True),
        ("plain", True),
        ("Bad_Domain/x", False),
        ("a/" + "x" * 64, False),
        ("a/-x", False),
        ("a/x\n", False),
    ],
)
def test_qualified_names(key, ok):
    assert is_qualified_name(key) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [("", True), ("NVIDIA-H100-80GB-HBM3", True), ("a_b.c", True), ("-a", False), ("x" * 64, False), ("a\n", False)],
)
def test_label_values(value, ok):
    assert is_label_value(value) is ok
