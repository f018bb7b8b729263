"""A small parser for dcgm-exporter's text exposition, specialised to its line shape.

`NAME{k="v",...} value` per line, `#` comments. Only the metric names asked for are parsed, so a
caller interested in five series of a 70 MB scrape does not pay for the other fifty. Values above
1e18 are DCGM's "not supported" sentinels and are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

SENTINEL = 1e18
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r'\\[\\n"]')
_UNESCAPED = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}


def unescape_label(value: str) -> str:
    """A label value as the text format escapes it (`\\\\`, `\\"`, `\\n`), undone in one pass as Prometheus does: a
    backslash before any other character stays. (Undoing one escape after the other breaks `\\\\n`, a backslash
    then n, into a newline.)"""
    return _ESCAPE.sub(lambda match: _UNESCAPED[match.group(0)], value) if "\\" in value else value


def parse(text: str, wanted: Iterable[str] | None = None) -> Iterator[tuple[str, dict[str, str], float]]:
    """Yield (metric, labels, value) for each sample line whose metric is in `wanted` (all if None)."""
    names = set(wanted) if wanted is not None else None
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        if brace == -1:
            name, _, rest = line.partition(" ")
            labels: dict[str, str] = {}
        else:
            name = line[:brace]
            end = line.rfind("}")
            if end == -1:
                continue
            rest = line[end + 1 :]
            if names is not None and name not in names:
                continue
            labels = {k: unescape_label(v) for k, v in _LABEL.findall(line[brace + 1 : end])}
        if names is not None and name not in names:
            continue
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        if abs(value) > SENTINEL:
            continue
        yield name, labels, value


def per_gpu(text: str, wanted: Iterable[str]) -> dict[str, dict[str, float]]:
    """{gpu index: {metric: value}} for the wanted metrics of one node's scrape."""
    out: dict[str, dict[str, float]] = {}
    for name, labels, value in parse(text, wanted):
        gpu = labels.get("gpu")
        if gpu is not None:
            out.setdefault(gpu, {})[name] = value
    return out
