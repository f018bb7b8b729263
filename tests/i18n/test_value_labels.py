"""Every stored code a page shows through the `label` filter is marked for translation, and reads as a word."""

import re
from pathlib import Path

from django.conf import settings
from django.utils import translation

from apps.core import stored_text
from apps.core.templatetags.console import label
from apps.core.value_labels import marked, sources


def test_every_code_of_every_context_is_marked():
    have = marked()
    missing = {
        context: sorted(set(codes) - have.get(context, set()))
        for context, codes in sources().items()
        if set(codes) - have.get(context, set())
    }
    assert not missing, f"Mark these codes (the choices' value_labels, or where the app registers them): {missing}"


def test_every_context_a_page_uses_is_registered():
    """Core knows no app: each app registers its contexts in AppConfig.ready; one left out would show codes."""
    root = Path(settings.BASE_DIR)
    used = {
        match
        for path in [*root.joinpath("templates").rglob("*.html"), *root.joinpath("apps").rglob("*.html")]
        for match in re.findall(r'\|label:"([^"]+)"', path.read_text())
    }
    used |= {
        match
        for path in root.joinpath("apps").rglob("*.py")
        for match in re.findall(r'value_label\([^()]*(?:\([^()]*\))?[^()]*, "([^"]+)"\)', path.read_text())
    }
    used |= set(stored_text.registry().labels.values())  # stored texts' parameters shown as labels
    assert len(used) >= 15, "the pages use the label filter"
    assert not used - set(sources()), f"contexts no app registers: {sorted(used - set(sources()))}"


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
