"""Django's own error views, answering in the API's JSON error shape on API paths.

DRF's exception handler (apps/core/api/errors.py) only sees what a DRF view raises. A URL no view matches,
an exception that escapes a view or a middleware, a request Django refuses before any view (a bad Host, a body
over DATA_UPLOAD_MAX_MEMORY_SIZE) are answered by these `handler404/500/400/403` (console/urls.py): on
`/api/` paths in the one JSON shape, elsewhere by Django's HTML pages as before.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _
from django.views import defaults

from apps.core.api.errors import error_body

API_PREFIX = "/api/"


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def _json(message: str, code: str, status: int) -> JsonResponse:
    return JsonResponse(error_body(message, code), status=status)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _json(_("Not found."), "not_found", 404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return _json(_("Server error: the request id is in the console's log."), "server_error", 500)
    return defaults.server_error(request)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _json(_("Bad request."), "bad_request", 400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        message = str(exception) or _("You do not have permission to perform this action.")
        return _json(message, "permission_denied", 403)
    return defaults.permission_denied(request, exception)
