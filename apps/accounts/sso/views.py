"""The log-in through the identity provider (start, callback) and the provider's logout URL.

They answer 404 while single sign-on is off. Any failure (the provider unreachable or misconfigured, a refused
token, a refused person) sends the person back to the log-in page with the reason, never a 500.
"""

from __future__ import annotations

import logging
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import SuspiciousOperation
from django.http import Http404
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from apps.accounts.sso import discovery, enabled
from apps.accounts.sso.backend import SsoRefused
from apps.core.errors import ServiceError

logger = logging.getLogger(__name__)


def _failed(request, reason: str):
    logger.warning("single sign-on log-in failed: %s", reason)
    messages.error(request, _("Log-in through the identity provider failed: %(reason)s") % {"reason": reason})
    return redirect("login")


class OidcLoginView(OIDCAuthenticationRequestView):
    def __init__(self, *args, **kwargs):
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)  # the endpoints come from discovery

    def get(self, request):
        if not enabled():
            raise Http404
        try:
            self.OIDC_OP_AUTH_ENDPOINT = discovery.provider().authorization_endpoint
        except discovery.SsoUnavailable as exc:
            return _failed(request, str(exc))
        self.OIDC_RP_CLIENT_ID = settings.OIDC_CLIENT_ID
        return super().get(request)


class OidcCallbackView(OIDCAuthenticationCallbackView):
    def get(self, request):
        if not enabled():
            raise Http404
        # The provider's own refusal (the person cancelled, ...): the library forgets the state, then fails.
        self.reason = request.GET.get("error_description") or request.GET.get("error") or ""
        try:
            return super().get(request)
        except (discovery.SsoUnavailable, SsoRefused, SuspiciousOperation, ServiceError) as exc:
            return _failed(request, str(exc))

    def login_failure(self):
        return _failed(
            self.request, self.reason or _("the log-in was not completed (expired or already used); try again")
        )


def end_session_url(request) -> str:
    """Where to send a person who logs out after logging in through the provider (RP-initiated logout), or ''
    when the provider offers no end_session_endpoint or this session did not come from it."""
    id_token = request.session.get("oidc_id_token")
    if not enabled() or not id_token:
        return ""
    try:
        endpoint = discovery.provider().end_session_endpoint
    except discovery.SsoUnavailable as exc:
        logger.warning("no RP-initiated logout: %s", exc)
        return ""
    if not endpoint:
        return ""
    query = {
        "id_token_hint": id_token,
        "client_id": settings.OIDC_CLIENT_ID,
        "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
    }
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}"
