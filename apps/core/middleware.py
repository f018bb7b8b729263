"""Middleware shared by every app."""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse

from apps.core.request_context import new_request_id, reset_request_id, set_request_id


class RequestIdMiddleware:
    """Give each request an id (`X-Request-ID` in and out) that audit events and errors carry."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = new_request_id(request.headers.get("X-Request-ID"))
        request.request_id = request_id
        token = set_request_id(request_id)
        try:
            response = self.get_response(request)
        finally:
            reset_request_id(token)
        response["X-Request-ID"] = request_id
        return response


class RefuseNulMiddleware:
    """A NUL character in the path or a query parameter is a 400 before any view (JSON on /api/, see
    apps/core/api/handlers.py). No name, slug or filter value has one, and PostgreSQL refuses to compare text
    with one: every lookup and filter that passed it on would be a 500."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or any(
            "\x00" in key or any("\x00" in value for value in values) for key, values in request.GET.lists()
        ):
            raise SuspiciousOperation("NUL character in the path or the query string")
        return self.get_response(request)
