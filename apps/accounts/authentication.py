"""`Authorization: Bearer <token>` for the REST API."""

from __future__ import annotations

import json
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from apps.accounts.models import ApiToken, token_digest
from apps.accounts.permissions import GRANTS_ATTR
from apps.core.api.throttling import count_bad_token
from apps.core.joined import fetch_joined


def _grants_sql(user_alias: str) -> str:
    """A subquery: the user's memberships as a JSON array of [tenant id, role] (what `user_grants` reads)."""
    grants = (
        "COALESCE(json_agg(json_build_array(m.tenant_id, m.role)), '[]')"
        if connection.vendor == "postgresql"
        else "json_group_array(json_array(m.tenant_id, m.role))"
    )
    return f"(SELECT {grants} FROM accounts_membership m WHERE m.user_id = {user_alias}.id)"  # noqa: S608


def _keep_grants(user, found) -> None:
    found = json.loads(found) if isinstance(found, str) else found
    setattr(user, GRANTS_ATTR, [(tenant_id, role) for tenant_id, role in found])


def user_with_grants(user_id):
    """The user `user_id` (None if none) with their memberships, in one statement: what a session's request reads
    first (`ModelBackend.get_user`) plus what `permissions.user_grants` would read next."""
    from django.contrib.auth import get_user_model

    user = fetch_joined(get_user_model(), (), "id", user_id, extra=(_grants_sql("t0"),))
    if user is not None:
        _keep_grants(user, user.joined_extra[0])
    return user


def find_token(digest: str) -> ApiToken | None:
    """The token with its user, tenant and the user's grants, in one statement (every API request asks).

    What `ApiToken.objects.select_related("user", "tenant").filter(digest=...).first()` returns, plus the
    memberships `permissions.user_grants` would read next, without compiling the query on every request.
    """
    token = fetch_joined(ApiToken, ("user", "tenant"), "digest", digest, extra=(_grants_sql("t1"),))
    if token is not None:
        _keep_grants(token.user, token.joined_extra[0])
    return token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """Authenticate an API token; unknown, revoked and expired tokens get a 401 saying which."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        if parts[0].lower() != self.keyword.lower():
            return None
        try:
            return self._authenticate(parts)
        except exceptions.AuthenticationFailed:
            count_bad_token(request)  # a 429 instead once this address has failed too often
            raise

    def _authenticate(self, parts: list[str]):
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header; use 'Bearer <token>'.")
        raw = parts[1]
        token = find_token(token_digest(raw)) if raw.startswith(settings.API_TOKEN_PREFIX) else None
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid API token.")
        now = timezone.now()
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This API token was revoked.")
        if token.expires_at is not None and token.expires_at <= now:
            raise exceptions.AuthenticationFailed("This API token has expired.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("The token's user is inactive.")
        self._touch(token, now)
        user = token.user
        user.api_token = token  # permissions.scope_for narrows the user's rights to the token's scope
        return user, token

    @staticmethod
    def _touch(token: ApiToken, now) -> None:
        # At most one write per token per resolution window: CI polling must not turn every GET into an UPDATE.
        resolution = timedelta(seconds=settings.API_TOKEN_LAST_USED_RESOLUTION_S)
        if token.last_used_at is not None and token.last_used_at >= now - resolution:
            return  # recorded recently: no write at all
        ApiToken.objects.filter(pk=token.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - resolution)
        ).update(last_used_at=now)

    def authenticate_header(self, request) -> str:
        return f'{self.keyword} realm="api"'


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Describe bearer tokens in the OpenAPI schema so Swagger UI offers an 'Authorize' box for them."""

    target_class = "apps.accounts.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An API token: `Authorization: Bearer gpuc_…`"}
