"""The API's JSON parser, bounded (apps/core/jsondepth.py): a body larger than DATA_UPLOAD_MAX_MEMORY_SIZE, nested
too deep or holding a NUL character is a 400.

DRF reads the request stream itself, so Django's DATA_UPLOAD_MAX_MEMORY_SIZE (which guards `request.body` and
forms) never applied to the API: the parser reads at most that many bytes.
"""

from __future__ import annotations

import io
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from apps.core.jsondepth import json_problem, too_deep_message


def _refused(problem: str) -> ParseError:
    return ParseError(_("JSON parse error - %(problem)s.") % {"problem": problem})


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None:
            raw = stream.read(limit + 1)
            if len(raw) > limit:
                raise _refused(_("the body is larger than %(limit)s bytes") % {"limit": limit})
            stream = io.BytesIO(raw)
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise _refused(too_deep_message()) from None
        if problem := json_problem(data):
            raise _refused(problem)
        return data
