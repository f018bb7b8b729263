"""The request id of the work being done, for audit events and logs (contextvars work for threads and async)."""

from __future__ import annotations

import contextvars
import re
import uuid

_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
_VALID = re.compile(r"^[A-Za-z0-9._\-]{1,64}$")


def new_request_id(incoming: str | None = None) -> str:
    """Accept a caller's id when it is short and plain (so CI logs can be correlated), else make one."""
    if incoming and _VALID.match(incoming):
        return incoming
    return uuid.uuid4().hex


def get_request_id() -> str:
    return _request_id.get()


def set_request_id(value: str) -> contextvars.Token:
    return _request_id.set(value)


def reset_request_id(token: contextvars.Token) -> None:
    _request_id.reset(token)
