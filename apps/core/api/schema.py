"""The OpenAPI schema says what the server does: every operation declares the errors it can answer.

The error statuses are the same for the whole API (docs/api.md, "Errors"): any call may be invalid (400: a body,
a filter, a page size), unauthenticated (401), refused (403) or miss its row or page (404); a write may also
conflict (409) or come in another content type (415). Each is declared once here rather than on 123 views, in
the one error shape of apps/core/api/errors.py.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import FieldDoesNotExist
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

EVERY_OPERATION = {
    "400": "Invalid input: the body, a query parameter or a filter value (`fields` names them).",
    "401": "No credentials, or an unknown, revoked or expired token.",
    "403": "The action is not allowed to you on this tenant.",
    "404": "No such row, not in your view scope, or a page past the end.",
    "429": "A rate limit was reached (`code` throttled); the `Retry-After` header says when to try again.",
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


def _model_field(field: serializers.Field) -> tuple[Any, bool]:
    """The model field a serializer field reads (through `source`, across foreign keys), and whether any step
    of the way may be null. (None, False) when it reads no model field."""
    model = getattr(getattr(field.parent, "Meta", None), "model", None)
    found, nullable = None, False
    for attr in getattr(field, "source_attrs", None) or ():
        if model is None:
            return None, False
        try:
            found = model._meta.get_field(attr)
        except FieldDoesNotExist:
            return None, False
        if not found.concrete:  # a reverse relation: a list, never null
            return None, False
        nullable = nullable or found.null
        model = found.related_model if found.is_relation else None
    return found, nullable


class ConsoleAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, plus what the answers really hold: the error responses every operation can
    give; a read field is `nullable` where its model field (or a foreign key on the way to it) may be null; and a
    model field that may be blank has no `format` or `pattern` in answers (an empty e-mail is not an e-mail)."""

    def _get_serializer_field_meta(self, field, direction):
        meta = super()._get_serializer_field_meta(field, direction)
        if direction == "response" and isinstance(field, serializers.Field) and _model_field(field)[1]:
            meta["nullable"] = True
        return meta

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        self._direction = direction  # for _insert_field_validators, which is called right after with no direction
        return super()._map_serializer_field(field, direction, bypass_extensions)

    def _insert_field_validators(self, field, schema):
        super()._insert_field_validators(field, schema)
        if getattr(self, "_direction", None) == "response" and isinstance(schema, dict):
            model_field = _model_field(field)[0]
            if model_field is not None and getattr(model_field, "blank", False):
                schema.pop("pattern", None)
                if schema.get("format") == "email":
                    schema.pop("format")

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
