"""What a reader sees of a page: its text and the attributes read aloud or shown on hover, minus code and data.

Used by the zh-Hans crawl to find English words left in a translated page. Only the standard library.
"""

from __future__ import annotations

import bisect
import re
from html.parser import HTMLParser

# Elements whose content is not prose for translation: code, scripts and raw data shown as is.
SKIPPED = {"script", "style", "code", "pre", "kbd", "samp", "textarea", "template"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# Attributes a reader meets: tooltips, placeholders, screen-reader names, image descriptions.
READ_ATTRIBUTES = {"title", "placeholder", "aria-label", "alt"}


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.skip_depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if self.skip_depth == 0:
            for name, value in attrs:
                if name in READ_ATTRIBUTES and value:
                    self.parts.append(value)
        if tag in VOID:
            return
        self.stack.append(tag)
        if tag in SKIPPED:
            self.skip_depth += 1

    def handle_startendtag(self, tag, attrs):
        if self.skip_depth == 0:
            for name, value in attrs:
                if name in READ_ATTRIBUTES and value:
                    self.parts.append(value)

    def handle_endtag(self, tag):
        if tag in VOID or tag not in self.stack:
            return
        while self.stack:
            open_tag = self.stack.pop()
            if open_tag in SKIPPED:
                self.skip_depth -= 1
            if open_tag == tag:
                break

    def handle_data(self, data):
        if self.skip_depth == 0 and data.strip():
            self.parts.append(data)


def visible_text(html: str) -> list[str]:
    """The page's text pieces (text nodes and read attributes), outside code, pre, kbd, scripts and styles."""
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return [" ".join(part.split()) for part in collector.parts]


class Data:
    """Stored values a page shows as they are: removed whole, or recognised as a shortened prefix ("abc...")."""

    def __init__(self, values: set[str]):
        values = {v for v in values if len(v) >= 2}
        alternatives = "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)) or "(?!)"
        self.pattern = re.compile(rf"(?<![A-Za-z0-9_:-])(?:{alternatives})(?![A-Za-z0-9_-])")
        self.sorted = sorted(values)

    def is_shortened(self, piece: str) -> bool:
        """The piece is a data value cut short by the page (truncatechars, or "..." added by the code)."""
        if not piece.endswith(("...", "…")):
            return False
        head = piece.rstrip(".…").rstrip()
        if len(head) < 8:
            return False
        i = bisect.bisect_left(self.sorted, head)
        return i < len(self.sorted) and self.sorted[i].startswith(head)

    def remove(self, piece: str) -> str:
        return "" if self.is_shortened(piece) else self.pattern.sub(" ", piece)


# A run of Latin letters, digits and the punctuation identifiers are made of ("kueue.x-k8s.io/queue-name").
RUN = re.compile(r"[A-Za-z0-9_.:/#=<>'\"`@*+-]*[A-Za-z][A-Za-z0-9_.:/#=<>'\"`@*+-]*")
IDENTIFIER_MARKS = re.compile(r"[0-9_.:/#=<>'\"`@*+]|[a-z][A-Z]|[A-Za-z]-[A-Za-z]")


def is_identifier(run: str) -> bool:
    """Code-like runs are not English prose: paths, dotted or hyphenated names (kube-scheduler, ci-vision-team,
    Idempotency-Key), camelCase, quoted words ('node', "python" in a JSON example), names with digits."""
    return bool(IDENTIFIER_MARKS.search(run.strip(".:'\"`")) or run.strip(".:").startswith(("'", '"', "`")))


def english_words(pieces: list[str], data: Data | None, allowed: set[str]) -> list[tuple[str, str]]:
    """(word, the piece it is in) for every English word left once data values, identifiers, acronyms (all
    capitals) and allowed terms are removed."""
    allowed_lower = {a.lower() for a in allowed}
    found = []
    for piece in pieces:
        text = data.remove(piece) if data else piece
        for run in RUN.findall(text):
            if is_identifier(run):
                continue
            for word in re.findall(r"[A-Za-z]+", run):
                if len(word) < 2 or word.isupper() or word.lower() in allowed_lower:
                    continue
                found.append((word, piece))
    return found
