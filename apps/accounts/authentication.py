"""`Authorization: Bearer <token>` for the REST API."""

from __future__ import annotations

import json
from datetime import timedelta
from functools import cache

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from apps.accounts.models import ApiToken, User, token_digest
from apps.accounts.permissions import GRANTS_ATTR
from apps.tenancy.models import Tenant


@cache
def _token_statement(vendor: str) -> str:
    def columns(model, alias):
        return [f"{alias}.{connection.ops.quote_name(f.column)}" for f in model._meta.concrete_fields]

    select = ", ".join(columns(ApiToken, "t") + columns(User, "u") + columns(Tenant, "n"))
    grants = (
        "COALESCE(json_agg(json_build_array(m.tenant_id, m.role)), '[]')"
        if vendor == "postgresql"
        else "json_group_array(json_array(m.tenant_id, m.role))"
    )
    return (
        f"SELECT {select}, (SELECT {grants} FROM accounts_membership m WHERE m.user_id = u.id) "  # noqa: S608
        "FROM accounts_apitoken t JOIN accounts_user u ON u.id = t.user_id "
        "LEFT JOIN tenancy_tenant n ON n.id = t.tenant_id WHERE t.digest = %s"
    )


def _instance(model, row, start: int):
    fields = model._meta.concrete_fields
    values = list(row[start : start + len(fields)])
    for i, field in enumerate(fields):
        if hasattr(field, "from_db_value"):
            values[i] = field.from_db_value(values[i], None, connection)
    return model.from_db(connection.alias, [f.attname for f in fields], values), start + len(fields)


def find_token(digest: str) -> ApiToken | None:
    """The token with its user, tenant and the user's grants, in one statement (every API request asks).

    What `ApiToken.objects.select_related("user", "tenant").filter(digest=...).first()` returns, plus the
    memberships `permissions.user_grants` would read next, without compiling the query on every request.
    SQLite (the demo) keeps the ORM's way: its column types need the ORM's converters.
    """
    if connection.vendor != "postgresql":
        return ApiToken.objects.select_related("user", "tenant").filter(digest=digest).first()
    with connection.cursor() as cursor:
        cursor.execute(_token_statement(connection.vendor), [digest])
        row = cursor.fetchone()
    if row is None:
        return None
    token, at = _instance(ApiToken, row, 0)
    user, at = _instance(User, row, at)
    tenant, at = _instance(Tenant, row, at)
    ApiToken.user.field.set_cached_value(token, user)
    ApiToken.tenant.field.set_cached_value(token, tenant if token.tenant_id is not None else None)
    grants = row[at] if not isinstance(row[at], str) else json.loads(row[at])
    setattr(user, GRANTS_ATTR, [(tenant_id, role) for tenant_id, role in grants])
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
