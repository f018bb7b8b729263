"""API rate limits: per token, per user and per anonymous address, counted in the shared cache.

Rates come from `settings.API_THROTTLE_RATES` (environment: API_THROTTLE_TOKEN/USER/ANON/BAD_TOKEN),
read on every request so a test or an operator changing the setting takes effect at once. A limit
reached raises DRF's `Throttled`, which the API's error handler turns into a 429 with `Retry-After`
in the one JSON error shape.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework import exceptions, throttling

from apps.core.client_ip import client_ip


class _SettingsRateThrottle(throttling.SimpleRateThrottle):
    def __init__(self):  # the rate is read per request, not frozen at import like DRF's THROTTLE_RATES
        self.rate = self.get_rate()
        if self.rate is not None:
            self.num_requests, self.duration = self.parse_rate(self.rate)

    def get_rate(self) -> str | None:
        return settings.API_THROTTLE_RATES.get(self.scope)

    def get_ident(self, request) -> str:
        return client_ip(request)

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        return super().allow_request(request, view)


class TokenRateThrottle(_SettingsRateThrottle):
    """Requests made with one API token."""

    scope = "token"

    def get_cache_key(self, request, view) -> str | None:
        token = getattr(request.user, "api_token", None) if request.user.is_authenticated else None
        if token is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": token.pk}


class UserRateThrottle(_SettingsRateThrottle):
    """Requests of one user, by browser session and all of the user's tokens together."""

    scope = "user"

    def get_cache_key(self, request, view) -> str | None:
        if not request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


class AnonRateThrottle(_SettingsRateThrottle):
    """Unauthenticated requests, per client address."""

    scope = "anon"

    def get_cache_key(self, request, view) -> str | None:
        if request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class BadTokenThrottle(_SettingsRateThrottle):
    """Bearer tokens that fail to authenticate, per client address: guessing tokens gets a 429."""

    scope = "bad_token"

    def get_cache_key(self, request, view) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def count_bad_token(request) -> None:
    """Count one failed token; raise `Throttled` once the address has failed too often."""
    throttle = BadTokenThrottle()
    if not throttle.allow_request(request, None):
        raise exceptions.Throttled(throttle.wait())
