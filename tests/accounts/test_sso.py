"""Single sign-on against the real OpenID provider (tests/oidc): discovery, ID-token validation, the log-in pages.

Tokens are signed by the provider's own published key (its custom CI grant signs any claims asked for) or by a
key made here (a forgery); the browser journey is in tests/e2e/test_sso.py.
"""

from __future__ import annotations

import base64
import ipaddress
import json

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.exceptions import SuspiciousOperation
from django.urls import reverse

from apps.accounts.models import User
from apps.accounts.sso import discovery
from apps.accounts.sso.backend import OidcBackend, verify_id_token
from apps.audit.models import AuditEvent
from tests.oidc_provider import use_provider

# The provider's fixture starts the live server, whose tests flush the database: marked so, pytest-django runs them
# with the other transactional tests (after the ones that rely on the seeded rows).
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sso(settings, oidc_provider):
    use_provider(settings, oidc_provider)
    yield oidc_provider
    discovery.forget()


def _key_for(token: str):
    header = jwt.get_unverified_header(token)
    return next(jwt.PyJWK(k) for k in discovery.jwks()["keys"] if k["kid"] == header["kid"])


def _token(sso, **claims) -> str:
    return sso.ci_id_token(**{"aud": sso.client_id, "sub": "alice", **claims})


def _verify(sso, token: str) -> dict:
    return verify_id_token(token, _key_for(token), issuer=sso.issuer, client_id=sso.client_id)


def test_discovery_gives_every_endpoint_of_the_provider(sso):
    found = discovery.provider()
    document = sso.discovery()
    assert found.issuer == sso.issuer == document["issuer"]
    assert found.authorization_endpoint == document["authorization_endpoint"]
    assert found.token_endpoint == document["token_endpoint"]
    assert found.jwks_uri == document["jwks_uri"]
    assert found.end_session_endpoint == document["end_session_endpoint"]


def test_a_token_signed_by_the_provider_for_this_client_is_accepted(sso):
    claims = _verify(sso, _token(sso))
    assert claims["sub"] == "alice"
    assert claims["iss"] == sso.issuer


def test_a_wrong_audience_is_refused(sso):
    with pytest.raises(SuspiciousOperation, match=r"(?i)audience"):
        _verify(sso, _token(sso, aud="another-client"))


def test_an_expired_token_is_refused(sso):
    with pytest.raises(SuspiciousOperation, match=r"(?i)expired"):
        _verify(sso, _token(sso, exp_in=-120))


def test_another_issuer_is_refused(sso):
    with pytest.raises(SuspiciousOperation, match=r"(?i)issuer"):
        _verify(sso, _token(sso, iss_override="https://idp.example.test"))


def test_a_tampered_token_is_refused(sso):
    header, payload, signature = _token(sso).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "bob"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    token = f"{header}.{forged}.{signature}"
    with pytest.raises(SuspiciousOperation, match="Signature"):
        _verify(sso, token)


def test_a_token_signed_by_another_key_is_refused(sso):
    real = _token(sso)
    own_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(
        jwt.decode(real, options={"verify_signature": False}),
        own_key,
        algorithm="RS256",
        headers={"kid": jwt.get_unverified_header(real)["kid"]},
    )
    with pytest.raises(SuspiciousOperation, match="Signature"):
        _verify(sso, forged)


def test_an_unsigned_token_is_refused(sso):
    claims = jwt.decode(_token(sso), options={"verify_signature": False})
    real_key = _key_for(_token(sso))
    unsigned = jwt.encode(claims, None, algorithm="none")
    with pytest.raises(SuspiciousOperation, match="alg value is not allowed"):
        verify_id_token(unsigned, real_key, issuer=sso.issuer, client_id=sso.client_id)


def test_the_backend_refuses_another_logins_nonce(sso):
    backend = OidcBackend()
    backend.provider = discovery.provider()
    backend.OIDC_OP_JWKS_ENDPOINT = backend.provider.jwks_uri
    backend.OIDC_RP_SIGN_ALGO = "RS256"
    backend.OIDC_RP_IDP_SIGN_KEY = None
    backend.OIDC_RP_CLIENT_SECRET = sso.client_secret
    token = _token(sso, nonce="the-nonce-of-this-login")
    assert backend.verify_token(token, nonce="the-nonce-of-this-login")["sub"] == "alice"
    with pytest.raises(SuspiciousOperation, match="Nonce"):
        backend.verify_token(token, nonce="another-login")


def test_the_login_page_shows_the_button_only_when_configured(client, settings, sso):
    settings.OIDC_BUTTON_LABEL = "Log in with Example SSO"
    assert "Log in with Example SSO" in client.get(reverse("login")).text
    settings.OIDC_ISSUER_URL = ""
    page = client.get(reverse("login")).text
    assert "Log in with Example SSO" not in page
    assert 'data-testid="sso-login"' not in page
    assert client.get(reverse("oidc:login")).status_code == 404


def test_the_start_of_a_login_sends_to_the_provider_with_pkce_and_nonce(client, sso):
    response = client.get(reverse("oidc:login"))
    assert response.status_code == 302
    location = response["Location"]
    assert location.startswith(discovery.provider().authorization_endpoint + "?")
    for part in ("code_challenge_method=S256", "code_challenge=", "nonce=", "state=", "client_id=console"):
        assert part in location


def test_an_unreachable_issuer_is_a_message_on_the_login_page_not_a_500(client, settings):
    settings.OIDC_ISSUER_URL = "http://127.0.0.1:9"  # the discard port: nothing answers
    settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET = "console", "secret"
    discovery.forget()
    response = client.get(reverse("oidc:login"), follow=True)
    assert response.status_code == 200
    assert "Log-in through the identity provider failed" in response.text
    assert "127.0.0.1:9/.well-known/openid-configuration cannot be read" in response.text


def test_an_issuer_the_outbound_policy_refuses_is_named(client, settings, sso):
    settings.OUTBOUND_ALLOWED_NETWORKS = [ipaddress.ip_network("10.0.0.0/8")]
    discovery.forget()
    response = client.get(reverse("oidc:login"), follow=True)
    assert "outbound policy refuses it" in response.text


def test_an_issuer_that_names_another_issuer_is_refused(client, settings, sso):
    settings.OIDC_ISSUER_URL = sso.issuer.replace("127.0.0.1", "localhost")
    discovery.forget()
    response = client.get(reverse("oidc:login"), follow=True)
    assert "set OIDC_ISSUER_URL to exactly the provider&#x27;s issuer" in response.text


def test_a_callback_without_a_started_login_is_refused_without_logging_in(client, sso):
    response = client.get(reverse("oidc:callback"), {"code": "made-up", "state": "made-up"}, follow=True)
    assert "Log-in through the identity provider failed" in response.text
    assert not User.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="user.").exists()


def test_misconfiguration_fails_at_start_up(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "OIDC_ISSUER_URL": "https://idp.example.test", "OIDC_CLIENT_ID": "", "DEBUG": "1"}
    env["DJANGO_SETTINGS_MODULE"] = "console.settings"
    env.pop("OIDC_CLIENT_SECRET", None)
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "OIDC_CLIENT_ID and OIDC_CLIENT_SECRET must be set" in result.stderr


def test_the_deploy_check_names_an_unreachable_provider_and_passes_a_working_one(settings, sso):
    from apps.accounts.sso.checks import identity_provider_answers

    assert identity_provider_answers() == []
    settings.OIDC_ISSUER_URL = "http://127.0.0.1:9"
    errors = identity_provider_answers()
    assert [e.id for e in errors] == ["accounts.E001"]
    assert "127.0.0.1:9/.well-known/openid-configuration cannot be read" in errors[0].msg


def test_only_the_callback_logs_in_through_the_provider(rf, sso):
    from apps.accounts.sso.backend import OidcBackend

    request = rf.post("/accounts/login/?code=a-code&state=a-state")
    # A password log-in, or any call without this log-in's nonce, never reaches the provider.
    assert OidcBackend().authenticate(request, username="alice", password="x") is None
    assert OidcBackend().authenticate(request) is None


@pytest.fixture
def claims_put_back(sso):
    """The accounts whose claims a test changes at the provider, put back as provider.mjs has them afterwards (the
    provider lives for the whole session)."""
    changed: dict[str, dict] = {}

    def change(account: str, **claims) -> None:
        before = sso.set_claims(account)  # asks nothing to change: the account's claims now
        changed.setdefault(account, {name: before[name] for name in claims})
        sso.set_claims(account, **claims)

    yield change
    for account, claims in changed.items():
        sso.set_claims(account, **claims)


def test_the_user_name_comes_from_the_configured_claim(client, settings, sso):
    settings.OIDC_USERNAME_CLAIM = "email"  # not the default preferred_username
    assert sso.log_in(client, "carol") == "/"
    carol = User.objects.get(oidc_subject="carol")
    assert (carol.username, carol.email) == ("carol@example.test", "carol@example.test")
    assert not User.objects.filter(username="carol").exists()
    assert client.get("/accounts/profile/").context["user"] == carol


def test_e_mail_and_name_are_refreshed_at_the_next_log_in_and_the_audit_event_says_how(client, sso, claims_put_back):
    assert sso.log_in(client, "dave") == "/"
    dave = User.objects.get(username="dave")
    assert (dave.email, dave.first_name, dave.last_name) == ("dave@example.test", "Dave", "Davis")
    first = AuditEvent.objects.get(action="user.login_oidc")
    assert first.before is None  # nothing changed at the first log-in: the account was made from these claims

    claims_put_back("dave", email="david.davis@example.test", name="David Davis-Moore")  # the IdP's admin edits dave
    client.logout()
    assert sso.log_in(client, "dave") == "/"
    dave.refresh_from_db()
    assert (dave.email, dave.first_name, dave.last_name) == ("david.davis@example.test", "David", "Davis-Moore")
    assert User.objects.filter(oidc_subject="dave").count() == 1  # the same account, found by its subject
    second = AuditEvent.objects.filter(action="user.login_oidc").latest("id")
    assert second.pk != first.pk and second.target_id == str(dave.pk)
    assert second.before == {"email": "dave@example.test", "first_name": "Dave", "last_name": "Davis"}
    assert {k: second.after[k] for k in ("email", "first_name", "last_name")} == {
        "email": "david.davis@example.test",
        "first_name": "David",
        "last_name": "Davis-Moore",
    }
