"""Stored codes the pages show as words (a node's state, a role, a runbook action), in the reader's language.

A page shows the code itself ("ready", "platform-admin", "drain") where English readers expect it; the
template filter `label` (apps/core/templatetags/console.py) looks the code up with its context here, so
English pages keep the code and other languages get its translation from the catalog.

Core keeps the mechanism only; each app registers the contexts it owns in its `AppConfig.ready`:
- choices carry their marks on the class, a tuple of `pgettext_lazy(context, code)` named `value_labels`
  (an `enum.nonmember`, so it is no choice), and the app calls `register_choices(context, TheChoices)`;
- other codes (the runbook's actions, the wait analytics' groupings) are marked where the app registers
  them: `register(context, codes, marks)`.
Marks are written as pgettext_lazy calls by that name, so that makemessages extracts code and context.
tests/i18n/test_value_labels.py checks that every registered code is marked, so a new state cannot slip
through untranslated.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import translation
from django.utils.translation import pgettext

_MARKED: dict[str, list] = {}
_SOURCES: dict[str, list[str]] = {}


def register(context: str, codes: Iterable, marks: Iterable) -> None:
    """Declare `context`: the codes a page may show in it (for the completeness test) and their lazy marks."""
    _SOURCES.setdefault(context, []).extend(str(code) for code in codes)
    _MARKED.setdefault(context, []).extend(marks)


def register_choices(context: str, *choices) -> None:
    """Declare `context` for TextChoices classes: their values, marked by their own `value_labels`."""
    for cls in choices:
        register(context, cls.values, cls.value_labels)


def marked() -> dict[str, set[str]]:
    """{context: the codes marked for it}, read untranslated."""
    with translation.override(None):
        return {context: {str(code) for code in codes} for context, codes in _MARKED.items()}


def sources() -> dict[str, list[str]]:
    """Where each context's codes come from, for the completeness test: {context: every code it must mark}."""
    return {context: list(codes) for context, codes in _SOURCES.items()}


def value_label(code, context: str) -> str:
    """The code in the active language (the code itself where the catalog has no translation, as in English)."""
    if code is None or code == "":
        return code
    return pgettext(context, str(code))
