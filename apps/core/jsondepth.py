"""JSON from outside, bounded: nested deeper than API_MAX_JSON_DEPTH, or a string with a NUL character, is refused
(never a RecursionError, never a database error on save).

Python's json module recurses once per level, so 1,000 nested arrays raise RecursionError (a 500) before any
validation sees them, and a body just under that would make every recursive walk after it (validation, deep
merges, rendering) deep too. Nothing the console takes is nested more than a few levels. The API's parser
(apps/core/api/parsers.py) and the pages' JSON fields (`BoundedJSONDecoder`) both check it.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _


def json_depth(value: Any) -> int:
    """How deeply objects and arrays nest in `value` (a scalar: 0), without recursing."""
    return _walk(value)[0]


def _walk(value: Any) -> tuple[int, bool]:
    """(depth, whether any key or string holds a NUL character), in one pass without recursion."""
    deepest, nul, stack = 0, "\x00" in value if isinstance(value, str) else False, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            nul = nul or any("\x00" in key for key in node)
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
            elif isinstance(child, str) and "\x00" in child:
                nul = True
    return deepest, nul


def too_deep_message() -> str:
    return _("nested deeper than %(max)s levels") % {"max": settings.API_MAX_JSON_DEPTH}


def json_problem(value: Any) -> str | None:
    """Why parsed JSON from outside is refused, or None: nested too deep, or a NUL character in a string (which
    PostgreSQL cannot store in text or jsonb, so that it would fail on save)."""
    depth, nul = _walk(value)
    if depth > settings.API_MAX_JSON_DEPTH:
        return too_deep_message()
    if nul:
        return _("a string holds a NUL character (\\u0000)")
    return None


class BoundedJSONDecoder(json.JSONDecoder):
    """A decoder for `json.loads(..., cls=)` and `forms.JSONField(decoder=)`: too deep is a JSONDecodeError."""

    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        try:
            value = super().decode(s, *args, **kwargs)
        except RecursionError:
            raise json.JSONDecodeError(too_deep_message(), s, 0) from None
        if problem := json_problem(value):
            raise json.JSONDecodeError(problem, s, 0)
        return value
