"""The identity provider's discovery document and signing keys, fetched under the outbound policy.

`provider()` reads `<OIDC_ISSUER_URL>/.well-known/openid-configuration` once per process (OpenID Connect
Discovery 1.0), checks that its `issuer` is exactly the configured one and that every endpoint is an http(s) URL
the outbound policy allows, and keeps it. `jwks()` keeps the provider's keys and reads them again when a token
names a key it does not know (the provider rotated its keys). A failure is an `SsoUnavailable` whose message
names the URL and the reason, for the log-in page and `manage.py check`; it is not kept, so the next log-in
tries again.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass

from django.conf import settings

from apps.core import outbound


class SsoUnavailable(Exception):
    """The identity provider cannot be used now: misconfigured, refused by the outbound policy, or not answering."""


@dataclass(frozen=True)
class Provider:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str = ""
    end_session_endpoint: str = ""


_lock = threading.Lock()
_providers: dict[str, Provider] = {}
_jwks: dict[str, dict] = {}


def fetch_json(request: urllib.request.Request | str) -> dict:
    """GET or POST under the outbound policy and parse a JSON object; SsoUnavailable naming the URL otherwise."""
    url = request.full_url if isinstance(request, urllib.request.Request) else request
    try:
        with outbound.urlopen(request, timeout=settings.OIDC_TIMEOUT_S) as response:
            body = json.load(response)
    except outbound.OutboundRefused as exc:
        raise SsoUnavailable(f"{url}: {exc}") from exc
    except urllib.error.HTTPError as exc:
        detail = exc.read(500).decode("utf-8", "replace")
        raise SsoUnavailable(f"{url} answered HTTP {exc.code}: {detail}") from exc
    except (OSError, ValueError) as exc:
        raise SsoUnavailable(f"{url} cannot be read: {exc}") from exc
    if not isinstance(body, dict):
        raise SsoUnavailable(f"{url} did not answer a JSON object")
    return body


def _endpoint(document: dict, name: str, *, required: bool) -> str:
    value = document.get(name) or ""
    if not value:
        if required:
            raise SsoUnavailable(f"the identity provider's discovery document has no {name}")
        return ""
    problem = outbound.url_error(value) if isinstance(value, str) else "not a string"
    if problem:
        raise SsoUnavailable(f"the identity provider's {name} {value!r}: {problem}")
    return value


def provider() -> Provider:
    issuer = settings.OIDC_ISSUER_URL
    if not issuer:
        raise SsoUnavailable("single sign-on is off (OIDC_ISSUER_URL is empty)")
    with _lock:
        if issuer in _providers:
            return _providers[issuer]
    problem = outbound.url_error(issuer)
    if problem:
        raise SsoUnavailable(f"OIDC_ISSUER_URL {issuer}: {problem}")
    document = fetch_json(f"{issuer}/.well-known/openid-configuration")
    if document.get("issuer") != issuer:
        raise SsoUnavailable(
            f"the discovery document at {issuer} names the issuer {document.get('issuer')!r}, not {issuer!r}: "
            "set OIDC_ISSUER_URL to exactly the provider's issuer"
        )
    found = Provider(
        issuer=issuer,
        authorization_endpoint=_endpoint(document, "authorization_endpoint", required=True),
        token_endpoint=_endpoint(document, "token_endpoint", required=True),
        jwks_uri=_endpoint(document, "jwks_uri", required=True),
        userinfo_endpoint=_endpoint(document, "userinfo_endpoint", required=False),
        end_session_endpoint=_endpoint(document, "end_session_endpoint", required=False),
    )
    with _lock:
        _providers[issuer] = found
    return found


def jwks(*, refresh: bool = False) -> dict:
    """The provider's JSON Web Key Set, read again when `refresh`."""
    uri = provider().jwks_uri
    with _lock:
        if not refresh and uri in _jwks:
            return _jwks[uri]
    keys = fetch_json(uri)
    if not isinstance(keys.get("keys"), list):
        raise SsoUnavailable(f"{uri} is not a JSON Web Key Set")
    with _lock:
        _jwks[uri] = keys
    return keys


def forget() -> None:
    """Drop what was read (tests; a changed configuration)."""
    with _lock:
        _providers.clear()
        _jwks.clear()
