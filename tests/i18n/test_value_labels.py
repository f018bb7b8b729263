"""Every stored code a page shows through the `label` filter is marked for translation, and reads as a word."""

from django.utils import translation

from apps.core.templatetags.console import label
from apps.core.value_labels import marked, sources


def test_every_code_of_every_context_is_marked():
    have = marked()
    missing = {
        context: sorted(set(codes) - have.get(context, set()))
        for context, codes in sources().items()
        if set(codes) - have.get(context, set())
    }
    assert not missing, f"Mark these codes in apps/core/value_labels.py: {missing}"


def test_english_shows_the_code_and_chinese_a_word():
    with translation.override("en"):
        assert label("platform-admin", "role") == "platform-admin"
        assert label("ready", "node state") == "ready"
    with translation.override("zh-hans"):
        assert label("platform-admin", "role") == "平台管理员"
        assert label("ready", "node state") == "就绪"
        # the same code reads differently in another context
        assert label("pending", "workload state") != "pending"
        assert label("", "role") == "" and label(None, "role") is None
