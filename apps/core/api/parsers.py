"""The API's JSON parser, bounded in depth (apps/core/jsondepth.py): a body nested too deep is a 400."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from apps.core.jsondepth import is_too_deep, too_deep_message


def _too_deep() -> ParseError:
    return ParseError(_("JSON parse error - %(problem)s.") % {"problem": too_deep_message()})


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise _too_deep() from None
        if is_too_deep(data):
            raise _too_deep()
        return data
