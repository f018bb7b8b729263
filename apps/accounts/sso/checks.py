"""`manage.py check --deploy`: the identity provider answers its discovery document and it can be used.

Start-up already refuses a malformed OIDC_ISSUER_URL or a missing client id or secret (console/settings.py);
this check calls the provider (a network call, so only with --deploy) and names what is wrong, as the log-in
page would.
"""

from __future__ import annotations

from django.core.checks import Error, Tags, register

from apps.accounts.sso import discovery, enabled


@register(Tags.security, deploy=True)
def identity_provider_answers(app_configs=None, **kwargs):
    if not enabled():
        return []
    discovery.forget()
    try:
        discovery.provider()
        discovery.jwks()
    except discovery.SsoUnavailable as exc:
        return [Error(f"single sign-on cannot be used: {exc}", id="accounts.E001", hint="See docs/sso.md.")]
    return []
