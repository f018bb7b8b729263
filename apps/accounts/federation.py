"""Workload identity federation: which trust a CI job's OIDC ID token matches (docs/sso.md, "CI pipelines").

`match(token)` reads the token's `iss` without trusting it, keeps the enabled trusts of that issuer, finds the
issuer's keys through its discovery document (every fetch under the outbound policy; the document and keys are
kept `JWKS_CACHE_S` seconds, and read again at once when a token names a key not in them), verifies the
signature (RS256 or ES256), `iss`, `exp`, `iat`/`nbf`, then each trust's `aud` and exact claim conditions.
It answers the first trust that matches, or raises `Refused` whose reason is for the audit log only: the caller
is told the same thing whatever went wrong.
"""

from __future__ import annotations

import threading
import time

import jwt

from apps.accounts.models import FederatedTrust
from apps.accounts.sso.discovery import SsoUnavailable, fetch_json
from apps.core import outbound

ALGORITHMS = ["RS256", "ES256"]
LEEWAY_S = 30
JWKS_CACHE_S = 300

_lock = threading.Lock()
_keys: dict[str, tuple[float, dict]] = {}


class Refused(Exception):
    """The token is not exchanged; the message (never the token) is for the audit event."""

    def __init__(self, reason: str, claims: dict | None = None):
        super().__init__(reason)
        self.claims = claims


class Unavailable(Refused):
    """The token names a trusted issuer whose keys cannot be read now: the caller may retry (503)."""


def _jwks(issuer: str, *, refresh: bool) -> dict:
    with _lock:
        kept = _keys.get(issuer)
    if kept and not refresh and time.monotonic() - kept[0] < JWKS_CACHE_S:
        return kept[1]
    problem = outbound.url_error(issuer)
    if problem:
        raise SsoUnavailable(f"{issuer}: {problem}")
    document = fetch_json(f"{issuer.rstrip('/')}/.well-known/openid-configuration")
    if document.get("issuer") != issuer:
        raise SsoUnavailable(f"the discovery document at {issuer} names the issuer {document.get('issuer')!r}")
    uri = document.get("jwks_uri")
    problem = outbound.url_error(uri) if isinstance(uri, str) and uri else "no jwks_uri"
    if problem:
        raise SsoUnavailable(f"{issuer} jwks_uri: {problem}")
    keys = fetch_json(uri)
    if not isinstance(keys.get("keys"), list):
        raise SsoUnavailable(f"{uri} is not a JSON Web Key Set")
    with _lock:
        _keys[issuer] = (time.monotonic(), keys)
    return keys


def _key(issuer: str, header: dict) -> jwt.PyJWK:
    for refresh in (False, True):
        for key in _jwks(issuer, refresh=refresh)["keys"]:
            if key.get("kid") == header.get("kid") and key.get("alg", header.get("alg")) == header.get("alg"):
                return jwt.PyJWK(key)
    raise Refused(f"the key {header.get('kid')!r} is not in the issuer's JWKS")


def _conditions_hold(trust: FederatedTrust, claims: dict) -> bool:
    for name, wanted in trust.conditions.items():
        value = claims.get(name)
        # GitLab sends booleans as strings ("true"); a condition `true` matches both.
        if isinstance(wanted, bool) and isinstance(value, str):
            value = {"true": True, "false": False}.get(value, value)
        if value != wanted or type(value) is not type(wanted):
            return False
    return True


def match(token: str) -> tuple[FederatedTrust, dict]:
    """The trust `token` satisfies and its verified claims; Refused otherwise."""
    try:
        unverified = jwt.decode(token, options={"verify_signature": False})
        header = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError as exc:
        raise Refused(f"not a JWT: {exc}") from exc
    issuer = unverified.get("iss")
    trusts = (
        list(
            FederatedTrust.objects.filter(issuer=issuer, enabled=True, service_account__is_active=True)
            .select_related("service_account", "service_account__owner_tenant")
            .order_by("pk")
        )
        if isinstance(issuer, str)
        else []
    )
    if not trusts:
        raise Refused("no enabled trust names this issuer", unverified)
    if header.get("alg") not in ALGORITHMS:
        raise Refused(f"algorithm {header.get('alg')!r} is not accepted", unverified)
    try:
        key = _key(issuer, header)
    except SsoUnavailable as exc:
        raise Unavailable(f"the issuer's keys cannot be read: {exc}", unverified) from exc
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=ALGORITHMS,
            issuer=issuer,
            leeway=LEEWAY_S,
            options={"require": ["iss", "aud", "exp", "iat", "sub"], "verify_aud": False},
        )
    except jwt.InvalidTokenError as exc:
        raise Refused(f"invalid token: {exc}", unverified) from exc
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    for trust in trusts:
        if trust.audience in audiences and _conditions_hold(trust, claims):
            return trust, claims
    raise Refused("no trust of this issuer matches the audience and claims", claims)


def forget() -> None:
    """Drop the kept keys (tests)."""
    with _lock:
        _keys.clear()
