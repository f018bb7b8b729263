"""Stored English shown in the reader's language: admission and workload reasons, workload events, incident titles.

These texts are written once, in English, when no reader is known: the API returns them as they are, CI
pipelines and logs read them, and apps/observability/reasons.py sorts reasons into categories by their
English words. Each comes from a small fixed set of templates, marked for translation where the text is
made (`STORED_TEMPLATES` in a source module, which its app registers here with `register(module)` in its
`AppConfig.ready`: core knows no app). A page shows such a text through the `stored` filter
(apps/core/templatetags/console.py); `translate_stored` finds the template that made it, translates the
template and puts the parameters back, each translated the same way when it is itself such a text (the
admission reason inside "requeued after preemption: ...", a default rule's title inside an incident's).

A source module may also declare:
- `STORED_PARAMS`, {parameter: regular expression}: what a parameter looks like (a number, a node name),
  so that a text is split where it was joined ("%(head)s; %(lent)s lent out: ..." with a number for `lent`);
  other parameters match any text;
- `STORED_LABELS`, {parameter: value-label context}: the parameter is a stored code shown as a word
  ("running" → the "workload state" label, apps/core/value_labels.py);
- `STORED_KNOWN`, parameter names that must themselves be recognised for their template to count (a
  template as loose as "%(rule)s on %(node)s" would otherwise match any English sentence with "on").

Parameter names are shared by all the sources. A text no template made (a backend's own reason, a custom
rule's title, a reason cut at its column's length) is shown as it is stored.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from django.utils import translation
from django.utils.translation import gettext

from apps.core.value_labels import value_label

_SOURCES: list = []  # the registered source modules, in the order their apps are ready
MAX_DEPTH = 8  # nested texts: an admission reason in a requeue reason in an event is 5 deep
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")
_CODE = r"[a-z][a-z0-9-]*"  # a stored code (a state, a decision)


@dataclass(frozen=True)
class _Template:
    text: str
    pattern: re.Pattern
    params: tuple[str, ...]


@dataclass(frozen=True)
class _Registry:
    exact: dict[str, str]  # templates without parameters
    templates: tuple[_Template, ...]  # the others, most literal text first
    labels: dict[str, str]
    known: frozenset[str]


def _compile(template: str, shapes: dict[str, str]) -> _Template:
    parts, params, at = [], [], 0
    for match in _PLACEHOLDER.finditer(template):
        parts.append(re.escape(template[at : match.start()]))
        at = match.end()
        name = match.group(1)
        if name is None:
            parts.append("%")
        elif name in params:
            parts.append(f"(?P={name})")
        else:
            params.append(name)
            parts.append(f"(?P<{name}>{shapes.get(name, '.+?')})")
    parts.append(re.escape(template[at:]))
    return _Template(template, re.compile("".join(parts), re.DOTALL), tuple(params))


def register(source) -> None:
    """Recognise the texts `source` (a module, or any object with the same names) makes: its STORED_TEMPLATES
    and, where it declares them, STORED_PARAMS, STORED_LABELS and STORED_KNOWN (see above)."""
    if source not in _SOURCES:
        _SOURCES.append(source)
        registry.cache_clear()
        _translate.cache_clear()


def sources() -> tuple:
    """The registered source modules."""
    return tuple(_SOURCES)


@functools.cache
def registry() -> _Registry:
    texts: list[str] = []
    labels: dict[str, str] = {}
    shapes: dict[str, str] = {}
    known: set[str] = set()
    for module in _SOURCES:
        texts.extend(module.STORED_TEMPLATES)
        labels.update(getattr(module, "STORED_LABELS", {}))
        shapes.update(getattr(module, "STORED_PARAMS", {}))
        known.update(getattr(module, "STORED_KNOWN", ()))
    shapes.update(dict.fromkeys(labels, _CODE))
    exact = {t: t for t in texts if not _PLACEHOLDER.search(t)}
    compiled = [_compile(t, shapes) for t in dict.fromkeys(texts) if t not in exact]
    # More literal text first: "%(head)s; tier %(tier)s never borrows" before anything looser.
    compiled.sort(key=lambda t: -len(_PLACEHOLDER.sub("", t.text)))
    return _Registry(exact, tuple(compiled), labels, frozenset(known))


def recognise(text: str) -> tuple[str, dict[str, str]] | None:
    """(template, parameters) of the stored English `text`, or None when no template made it."""
    reg = registry()
    if text in reg.exact:
        return text, {}
    for template in reg.templates:
        match = template.pattern.fullmatch(text)
        if match and all(recognise(match[name]) for name in template.params if name in reg.known):
            return template.text, match.groupdict()
    return None


def translate_stored(text: str | None) -> str | None:
    """`text` in the active language where a template made it; as stored otherwise (and always in English)."""
    if not text or not isinstance(text, str):
        return text
    language = translation.get_language() or "en"
    if language == "en" or language.startswith("en-"):
        return text
    return _translate(text, language, 0)


@functools.lru_cache(maxsize=4096)
def _translate(text: str, language: str, depth: int) -> str:
    """Called in the active `language` (part of the cache key)."""
    found = recognise(text) if depth < MAX_DEPTH else None
    if found is None:
        return text
    template, params = found
    labels = registry().labels
    shown = {
        name: value_label(value, labels[name]) if name in labels else _translate(value, language, depth + 1)
        for name, value in params.items()
    }
    return gettext(template) % shown if params else gettext(template)
