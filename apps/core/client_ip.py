"""The client's address, for the log-in lockout and the API rate limits.

Behind `NUM_PROXIES` reverse proxies, each appends the address it received the request from to
X-Forwarded-For, so the client is the NUM_PROXIES-th entry from the right; entries further left are
whatever the client claimed and are never trusted. Without proxies it is REMOTE_ADDR.
"""

from __future__ import annotations

from django.conf import settings


def client_ip(request) -> str:
    remote = request.META.get("REMOTE_ADDR") or ""
    proxies = settings.NUM_PROXIES
    if not proxies:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    if len(forwarded) < proxies:
        return remote
    return forwarded[-proxies]
