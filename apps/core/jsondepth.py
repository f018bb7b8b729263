"""JSON from outside, bounded in depth: nested deeper than API_MAX_JSON_DEPTH is refused, never a RecursionError.

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
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def too_deep_message() -> str:
    return _("nested deeper than %(max)s levels") % {"max": settings.API_MAX_JSON_DEPTH}


def is_too_deep(value: Any) -> bool:
    return json_depth(value) > settings.API_MAX_JSON_DEPTH


class BoundedJSONDecoder(json.JSONDecoder):
    """A decoder for `json.loads(..., cls=)` and `forms.JSONField(decoder=)`: too deep is a JSONDecodeError."""

    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        try:
            value = super().decode(s, *args, **kwargs)
        except RecursionError:
            raise json.JSONDecodeError(too_deep_message(), s, 0) from None
        if is_too_deep(value):
            raise json.JSONDecodeError(too_deep_message(), s, 0)
        return value
