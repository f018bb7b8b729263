"""The log-in backend: mozilla-django-oidc's authorization code flow, with what it leaves to the relying party.

mozilla-django-oidc (5.0.2) sends the PKCE verifier, checks `state` and the ID token's `nonce` and signature
(PyJWT, which also refuses an `exp` in the past when there is one). It does not check `iss` or `aud` (it decodes
with `verify_aud` off), does not require `exp`, matches people by e-mail address, and calls the provider with
`requests` outside the console's outbound policy. Here:

* the endpoints and keys come from discovery (`discovery.py`), and every call goes through the outbound policy;
* the ID token must carry `iss` (the configured issuer), `aud` (our client id; with several audiences `azp` must be
  our client id), `exp`, `iat` and `sub`, be signed with RS256 by a key of the provider's JWKS, and carry the
  nonce of this log-in;
* the UserInfo answer must be about the same `sub` (OpenID Connect Core 5.3.2);
* a person is found by their `sub` (`User.oidc_subject`), created on first log-in with the name in
  OIDC_USERNAME_CLAIM, and refused when a local account of that name exists that is not theirs, unless a platform
  admin allowed that account to be linked (`services.allow_sso_link`);
* their identity-provider memberships are made what their groups (OIDC_GROUPS_CLAIM) give through the group
  mappings (`services.sync_idp_memberships`).
"""

from __future__ import annotations

import base64
import urllib.parse
import urllib.request

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from apps.accounts.sso import discovery, enabled
from apps.accounts.sso.discovery import SsoUnavailable

ALGORITHMS = ["RS256"]
LEEWAY_S = 30


class SsoRefused(Exception):
    """This person may not log in through the identity provider; the message says why."""


class OidcBackend(OIDCAuthenticationBackend):
    def __init__(self, *args, **kwargs):
        # The library reads its endpoints here; ours come from discovery when a log-in happens, so a password
        # log-in never contacts the provider.
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        # Only the callback's call, which carries this log-in's nonce (and PKCE verifier): never a password
        # log-in whose URL happens to have ?code=&state=.
        if not enabled() or request is None or not kwargs.get("nonce") or "password" in kwargs:
            return None
        if "code" not in request.GET or "state" not in request.GET:
            return None
        self.provider = discovery.provider()
        self.OIDC_OP_TOKEN_ENDPOINT = self.provider.token_endpoint
        self.OIDC_OP_USER_ENDPOINT = self.provider.userinfo_endpoint
        self.OIDC_OP_JWKS_ENDPOINT = self.provider.jwks_uri
        self.OIDC_RP_CLIENT_ID = settings.OIDC_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = ALGORITHMS[0]
        self.OIDC_RP_IDP_SIGN_KEY = None
        return super().authenticate(request, **kwargs)

    def get_user(self, user_id):
        """The session's user with their memberships in one statement (apps/accounts/backends.py), while the
        account is active: unlike the library's, a deactivated person's session ends at their next request, as
        Django's ModelBackend ends a password session."""
        from apps.accounts.authentication import user_with_grants

        user = user_with_grants(user_id)
        return user if user is not None and user.is_active else None

    # The provider's HTTP endpoints, under the outbound policy.

    def get_token(self, payload):
        """The token request, with the client authenticated by HTTP Basic (client_secret_basic)."""
        payload = dict(payload)
        payload.pop("client_secret", None)
        client = f"{urllib.parse.quote(settings.OIDC_CLIENT_ID, safe='')}:"
        client += urllib.parse.quote(settings.OIDC_CLIENT_SECRET, safe="")
        request = urllib.request.Request(  # noqa: S310 - http(s) from discovery; fetch_json applies the policy
            self.OIDC_OP_TOKEN_ENDPOINT,
            data=urllib.parse.urlencode(payload).encode(),
            headers={
                "Authorization": f"Basic {base64.b64encode(client.encode()).decode()}",
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            method="POST",
        )
        answer = discovery.fetch_json(request)
        if not answer.get("id_token"):
            raise SuspiciousOperation("the token endpoint answered no id_token")
        return answer

    def retrieve_matching_jwk(self, token):
        header = jwt.get_unverified_header(token)
        for refresh in (False, True):
            for key in discovery.jwks(refresh=refresh)["keys"]:
                if key.get("kid") == header.get("kid") and key.get("alg", header.get("alg")) == header.get("alg"):
                    return jwt.PyJWK(key)
        raise SuspiciousOperation(f"the ID token's key {header.get('kid')!r} is not in the provider's JWKS")

    def get_userinfo(self, access_token, id_token, payload):
        if not self.OIDC_OP_USER_ENDPOINT or not access_token:
            return dict(payload)
        headers = {"Authorization": f"Bearer {access_token}", "Accept": "application/json"}
        request = urllib.request.Request(self.OIDC_OP_USER_ENDPOINT, headers=headers)  # noqa: S310 - as above
        userinfo = discovery.fetch_json(request)
        if userinfo.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("the UserInfo answer is about another subject than the ID token")
        return {**payload, **userinfo}

    # The ID token.

    def _verify_jws(self, payload, key):
        return verify_id_token(payload, key, issuer=self.provider.issuer, client_id=settings.OIDC_CLIENT_ID)

    # The person.

    def get_or_create_user(self, access_token, id_token, payload):
        from apps.accounts import services

        claims = self.get_userinfo(access_token, id_token, payload)
        username = claims.get(settings.OIDC_USERNAME_CLAIM)
        if not isinstance(username, str) or not username.strip():
            raise SsoRefused(f"the identity provider sent no {settings.OIDC_USERNAME_CLAIM} claim")
        user = self.UserModel.objects.filter(oidc_subject=claims["sub"]).first()
        if user is None:
            local = self.UserModel.objects.filter(username=username, oidc_subject="").first()
            if local is not None and local.oidc_link_pending and not local.is_service_account:
                user = services.link_sso_user(local, subject=claims["sub"])
            elif self.UserModel.objects.filter(username=username).exists():
                raise SsoRefused(
                    f"a console account named {username} exists that is not linked to this identity provider; "
                    "ask a platform admin (docs/sso.md)"
                )
            else:
                user = services.create_sso_user(username=username, subject=claims["sub"], claims=claims)
        if not user.is_active or user.is_service_account:
            raise SsoRefused(f"the console account {user.username} is disabled")
        groups = groups_of(claims)
        user = services.record_sso_login(user, claims, groups)
        services.sync_idp_memberships(user, groups)
        return user


def local_login_allowed(username: str | None) -> bool:
    """May `username` log in with a password? Always, unless LOCAL_LOGIN is off: then only break-glass accounts."""
    return settings.LOCAL_LOGIN or (username or "") in settings.LOCAL_LOGIN_BREAK_GLASS_USERS


class BreakGlassBackend:
    """Ends a password log-in before any password is checked when LOCAL_LOGIN is off and the account is not a
    break-glass one (PermissionDenied stops Django's authenticate: no later backend is asked). Covers every
    password log-in, the Django admin's included."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if password is not None and not local_login_allowed(username):
            raise PermissionDenied("password log-in is off (LOCAL_LOGIN); use single sign-on")
        return None

    # No get_user: sessions are never this backend's (and the test client's force_login skips it).


def groups_of(claims: dict) -> list[str]:
    """The person's groups from OIDC_GROUPS_CLAIM: a list of names (a single name is taken as a list of one).

    A claim that is absent is no groups (providers leave it out for a person in none). A claim the provider moved
    out of the token (an overage: OpenID Connect Core 5.6.2's distributed claims, `_claim_names`, which Entra ID
    sends past 200 groups) refuses the log-in: taken as no groups, it would remove every role the groups give."""
    name = settings.OIDC_GROUPS_CLAIM
    if isinstance(claims.get("_claim_names"), dict) and name in claims["_claim_names"] and name not in claims:
        raise SsoRefused(
            f"the identity provider sent the {name} claim by reference (too many groups for its token); have it "
            "send only the groups assigned to the console, or app roles (docs/sso.md, Provider recipes)"
        )
    value = claims.get(name)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [group for group in value if isinstance(group, str)]
    return []


def verify_id_token(token: str, key, *, issuer: str, client_id: str) -> dict:
    """The ID token's claims once its signature, `iss`, `aud` (and `azp`), `exp` and `iat` are right;
    SuspiciousOperation naming what is wrong otherwise (the nonce is checked by the library's caller)."""
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=ALGORITHMS,
            audience=client_id,
            issuer=issuer,
            leeway=LEEWAY_S,
            options={"require": ["iss", "aud", "exp", "iat", "sub"]},
        )
    except jwt.InvalidTokenError as exc:
        raise SuspiciousOperation(f"ID token refused: {exc}") from exc
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise SuspiciousOperation("ID token refused: several audiences and azp is not this client")
    return claims


__all__ = ["OidcBackend", "SsoRefused", "SsoUnavailable", "verify_id_token"]
