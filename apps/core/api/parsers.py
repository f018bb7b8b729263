"""The API's JSON parser, bounded in depth (apps/core/jsondepth.py): a body nested too deep is a 400."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from apps.core.jsondepth import json_problem, too_deep_message


def _refused(problem: str) -> ParseError:
    return ParseError(_("JSON parse error - %(problem)s.") % {"problem": problem})


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise _refused(too_deep_message()) from None
        if problem := json_problem(data):
            raise _refused(problem)
        return data
