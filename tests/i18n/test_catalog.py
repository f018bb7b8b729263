"""The zh-Hans catalog is complete: every marked string is in it and translated, and the committed .mo agrees.

makemessages needs GNU gettext's xgettext (Debian package `gettext`, installed by scripts/ensure-gettext.sh
that `make test` runs). The .mo is committed so that a machine without gettext still shows Chinese.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.core.management import call_command

LOCALE = "zh_Hans"
PO = Path(settings.BASE_DIR) / "locale" / LOCALE / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")
PLACEHOLDER = re.compile(r"%\([A-Za-z_0-9]+\)[sdr]|%[sd]")
# The same ignores as docs/i18n.md and scripts/i18n: tests, benchmarks and local data hold no UI strings.
IGNORE = [".venv", "tests", "bench", "var", "locale"]
# Where marked strings live: Python code, templates, the console's own JavaScript.
SOURCES = ["apps", "console", "templates", "static/js"]


def key(entry: polib.POEntry) -> tuple[str, str, str]:
    return (entry.msgctxt or "", entry.msgid, entry.msgid_plural or "")


def live(catalog: polib.POFile) -> list[polib.POEntry]:
    return [e for e in catalog if not e.obsolete]


@pytest.fixture(scope="module")
def committed() -> polib.POFile:
    assert PO.exists(), f"{PO} is missing: run scripts/i18n update"
    return polib.pofile(str(PO))


def test_every_marked_string_is_in_the_catalog(committed, tmp_path, settings, monkeypatch):
    """Extract the marked strings afresh, from a scratch copy of the sources, and compare with the committed .po.

    makemessages writes next to the sources' own locale directory, so it runs in a copy to leave the
    committed catalog alone."""
    if shutil.which("xgettext") is None:
        pytest.fail("xgettext is missing: install GNU gettext (scripts/ensure-gettext.sh)")
    root = Path(settings.BASE_DIR)
    for part in SOURCES:
        shutil.copytree(root / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    settings.LOCALE_PATHS = [str(tmp_path / "locale")]
    monkeypatch.chdir(tmp_path)
    call_command("makemessages", locale=[LOCALE], ignore_patterns=IGNORE, verbosity=0)
    fresh = polib.pofile(str(tmp_path / "locale" / LOCALE / "LC_MESSAGES" / "django.po"))
    have = {key(e) for e in live(committed)}
    missing = sorted({key(e) for e in live(fresh)} - have)
    assert not missing, (
        f"{len(missing)} marked strings are not in {PO.relative_to(root)}; run `scripts/i18n update`, "
        f"translate them and commit the .po and .mo: {missing[:15]}"
    )
    stale = sorted(have - {key(e) for e in live(fresh)})
    assert not stale, f"Entries no code uses any more (scripts/i18n update drops them): {stale[:15]}"


def test_the_pure_modules_marker_is_extracted(committed):
    """`N_("...")` (apps/core/text.py) marks the templates of modules that import no Django; makemessages finds
    them only with --keyword=N_ (apps/core/management/commands/makemessages.py). Every one is in the catalog."""
    root = Path(settings.BASE_DIR) / "apps"
    marked = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "N_" and node.args):
                continue
            if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                marked.add(node.args[0].value)
    assert len(marked) > 50, "the spec parser's messages are marked with N_"
    missing = sorted(marked - {e.msgid for e in live(committed) if not e.msgctxt})
    assert not missing, f"N_ templates missing from the catalog (run scripts/i18n update): {missing[:10]}"


def test_every_entry_is_translated(committed):
    untranslated = [e.msgid for e in live(committed) if not e.translated()]
    fuzzy = [e.msgid for e in live(committed) if "fuzzy" in e.flags]
    assert not untranslated, f"{len(untranslated)} untranslated: {untranslated[:15]}"
    assert not fuzzy, f"{len(fuzzy)} fuzzy (check the translation, then remove the flag): {fuzzy[:15]}"
    assert committed.metadata.get("Plural-Forms") == "nplurals=1; plural=0;"


def test_translations_keep_their_placeholders(committed):
    wrong = []
    for e in live(committed):
        want = set(PLACEHOLDER.findall(e.msgid_plural or e.msgid))
        for text in e.msgstr_plural.values() if e.msgid_plural else [e.msgstr]:
            if set(PLACEHOLDER.findall(text)) != want:
                wrong.append((e.msgid, text))
    assert not wrong, wrong[:10]


def test_the_committed_mo_matches_the_po(committed):
    """The .mo is what Django reads: it must hold exactly the .po's translations (`scripts/i18n update` compiles)."""
    assert MO.exists(), f"{MO} is missing: run scripts/i18n update"
    compiled = polib.mofile(str(MO))

    def catalog(entries):
        out = {}
        for e in entries:
            if e.msgid == "":
                continue
            value = tuple(sorted(e.msgstr_plural.items())) if e.msgid_plural else e.msgstr
            out[key(e)] = value
        return out

    assert catalog(compiled) == catalog(live(committed)), "The .mo is out of date: run scripts/i18n update"
