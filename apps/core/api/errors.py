"""One JSON error shape for the whole API.

    {"message": "...", "code": "invalid", "fields": {"name": ["..."]}, "request_id": "..."}

DRF's own exceptions, Django's ValidationError/PermissionDenied/Http404 and our ServiceError all
end up here, so a CI pipeline can always read `message` and `fields`.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from apps.core.errors import ServiceError, referenced_conflict
from apps.core.request_context import get_request_id


def _flatten(detail: Any) -> list[str]:
    if isinstance(detail, dict):
        return [f"{key}: {msg}" for key, value in detail.items() for msg in _flatten(value)]
    if isinstance(detail, list):
        return [msg for item in detail for msg in _flatten(item)]
    return [str(detail)]


def _fields(detail: Any) -> dict[str, list[str]]:
    if not isinstance(detail, dict):
        return {}
    out: dict[str, list[str]] = {}
    for key, value in detail.items():
        out[str(key)] = _flatten(value)
    return out


def error_body(message: str, code: str, fields: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {"message": message, "code": code, "fields": fields or {}, "request_id": get_request_id()}


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, ProtectedError | RestrictedError):  # a delete no service turned into a Conflict itself
        exc = referenced_conflict(None, exc)
    if isinstance(exc, ServiceError):
        body = error_body(exc.message, exc.code, exc.fields)
        if exc.data:
            body["detail"] = exc.data
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else None
        return Response(body, status=exc.status_code, headers=headers)
    if isinstance(exc, DjangoValidationError):
        fields = exc.message_dict if hasattr(exc, "error_dict") else {}
        fields = {("non_field_errors" if key == "__all__" else key): value for key, value in fields.items()}
        message = "; ".join(exc.messages) if not fields else "Invalid input."
        return Response(error_body(message, "invalid", fields), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    detail = exc.detail if isinstance(exc, exceptions.APIException) else response.data
    if isinstance(exc, exceptions.ValidationError):
        fields = _fields(detail)
        if not fields:
            fields = {"non_field_errors": _flatten(detail)}
        non_field = fields.get("non_field_errors")
        message = non_field[0] if non_field and len(fields) == 1 else "Invalid input."
        response.data = error_body(message, "invalid", fields)
    else:
        code = getattr(exc, "default_code", "error")
        if isinstance(detail, exceptions.ErrorDetail):
            code = detail.code or code
        response.data = error_body(" ".join(_flatten(detail)), str(code))
    return response
