"""Single sign-on with OpenID Connect for people (docs/sso.md): discovery, the backend, the log-in views."""

from django.conf import settings


def enabled() -> bool:
    return bool(settings.OIDC_ISSUER_URL)
