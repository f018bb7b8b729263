"""The OpenAPI schema says what the server does: every operation declares the errors it can answer.

The error statuses are the same for the whole API (docs/api.md, "Errors"): any call may be invalid (400: a body,
a filter, a page size), unauthenticated (401), refused (403) or miss its row or page (404); a write may also
conflict (409) or come in another content type (415). Each is declared once here rather than on 123 views, in
the one error shape of apps/core/api/errors.py.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

EVERY_OPERATION = {
    "400": "Invalid input: the body, a query parameter or a filter value (`fields` names them).",
    "401": "No credentials, or an unknown, revoked or expired token.",
    "403": "The action is not allowed to you on this tenant.",
    "404": "No such row, not in your view scope, or a page past the end.",
}
WRITES = {
    "409": "A conflict with the current state (`code` says which).",
    "415": "The body is not `application/json`.",
}


class ErrorSerializer(serializers.Serializer):
    """The one error shape (apps/core/api/errors.py)."""

    message = serializers.CharField(help_text="One human-readable sentence.")
    code = serializers.CharField(help_text="A stable machine-readable code: invalid, not_found, conflict, ...")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Input field → its messages (`non_field_errors`: the body as a whole); empty if none.",
    )
    request_id = serializers.CharField(help_text="The request's id, also in the X-Request-ID header.")
    detail = serializers.JSONField(required=False, help_text="What the conflict is about, where there is more.")

    class Meta:
        ref_name = "Error"


class ConsoleAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, plus the error responses every operation can give."""

    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        errors = dict(EVERY_OPERATION)
        if self.method in ("POST", "PUT", "PATCH", "DELETE"):
            errors.update(WRITES)
        for code, description in errors.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorSerializer, code, direction=direction)
                responses[code]["description"] = description
        return responses
