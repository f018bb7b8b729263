"""--output json|yaml|table: machines read the API's own JSON (or YAML) unchanged; people get a table."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, Callable, TextIO, Union

import yaml

Column = tuple[str, Union[str, Callable[[dict], Any]]]


def dump(data: Any, fmt: str, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if fmt == "json":
        out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    elif fmt == "yaml":
        out.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False))
    else:
        raise ValueError(fmt)
    out.flush()


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={cell(v)}" for k, v in value.items()) or "-"
    return " ".join(str(value).split())  # one line per row


def table(rows: Sequence[dict], columns: Sequence[Column], out: TextIO | None = None, empty: str = "") -> None:
    """Left-aligned columns separated by two spaces; the last column is not padded (it may be long)."""
    out = out or sys.stdout
    if not rows:
        if empty:
            out.write(empty + "\n")
        return
    grid = [[header for header, _ in columns]]
    for row in rows:
        grid.append([cell(get(row)) if callable(get) else cell(row.get(get)) for _, get in columns])
    widths = [max(len(line[i]) for line in grid) for i in range(len(columns))]
    for line in grid:
        padded = [text.ljust(widths[i]) for i, text in enumerate(line[:-1])] + [line[-1]]
        out.write("  ".join(padded).rstrip() + "\n")
    out.flush()


def fields(pairs: Sequence[tuple[str, Any]], out: TextIO | None = None) -> None:
    """One `label: value` a line, labels aligned."""
    out = out or sys.stdout
    width = max((len(label) for label, _ in pairs), default=0)
    for label, value in pairs:
        out.write(f"{(label + ':').ljust(width + 1)} {cell(value)}\n")
    out.flush()


def gpus(value: Any) -> str:
    """A GPU count as pages show whole ones (8, not 8.0); fractions as the API gives them."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return cell(value)
