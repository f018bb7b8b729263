"""Errors that services raise; the API and the HTML views turn them into 4xx answers with the same message."""

from __future__ import annotations


class ServiceError(Exception):
    """A request the service refuses. `fields` maps input field names to messages."""

    status_code = 400
    code = "invalid"

    def __init__(
        self,
        message: str,
        fields: dict[str, list[str] | str] | None = None,
        code: str | None = None,
        data: dict | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.data = data or {}  # extra structured detail for API clients, e.g. a preemption impact
        self.fields = {key: value if isinstance(value, list) else [value] for key, value in (fields or {}).items()}
        if code:
            self.code = code


class InvalidInput(ServiceError):
    status_code = 400
    code = "invalid"


class Forbidden(ServiceError):
    status_code = 403
    code = "permission_denied"


class NotFound(ServiceError):
    status_code = 404
    code = "not_found"


class Conflict(ServiceError):
    status_code = 409
    code = "conflict"
