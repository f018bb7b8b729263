"""CI pipelines with their own identity: federated trusts and POST /api/v1/token-exchange/ (RFC 8693) against the
real OpenID provider (tests/oidc), whose CI grant signs GitLab-style job ID tokens with its published key."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from apps.accounts import federation
from apps.accounts import services as accounts
from apps.accounts.models import ApiToken, FederatedTrust, User
from apps.audit.models import AuditEvent
from apps.workloads.models import Workload
from tests.utils.personas import fresh
from tests.workloads.conftest import build_fleet, training_spec

# The provider's fixture starts the live server, whose tests flush the database.
pytestmark = pytest.mark.django_db(transaction=True)

AUDIENCE = "https://console.example.test"
EXCHANGE = "/api/v1/token-exchange/"
GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
CONDITIONS = {"project_path": "ml/llm-train", "ref_protected": True}


@pytest.fixture
def trust(oidc_provider, personas):
    federation.forget()
    yield accounts.create_federated_trust(
        fresh(personas.tenant_admin_a),
        service_account=personas.ci_a,
        issuer=oidc_provider.issuer,
        audience=AUDIENCE,
        conditions=CONDITIONS,
        max_minutes=10,
    )
    federation.forget()


def _job_token(provider, **claims) -> str:
    return provider.ci_id_token(
        **{
            "aud": AUDIENCE,
            "sub": "project_path:ml/llm-train:ref_type:branch:ref:main",
            "project_path": "ml/llm-train",
            "ref": "main",
            "ref_protected": "true",
            **claims,
        }
    )


def _exchange(api, token: str, *, as_form: bool = False, token_type: str = ID_TOKEN):
    body = {"grant_type": GRANT, "subject_token": token, "subject_token_type": token_type}
    if as_form:
        return api().post(EXCHANGE, urlencode(body), content_type="application/x-www-form-urlencoded")
    return api().post(EXCHANGE, body, format="json")


def test_a_matching_pipeline_gets_a_short_lived_token_that_submits_a_workload(api, oidc_provider, trust, personas):
    build_fleet(personas)
    response = _exchange(api, _job_token(oidc_provider))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 600
    assert response["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(user=personas.ci_a, name__startswith="token exchange")
    assert (token.tenant, token.role) == (personas.a, "member")
    assert timedelta(minutes=9) < token.expires_at - timezone.now() <= timedelta(minutes=10)

    submitted = api(token=body["access_token"]).post(
        "/api/v1/workloads/", {"kind": "training", "spec": training_spec()}, format="json"
    )
    assert submitted.status_code == 201, submitted.content
    assert Workload.objects.get(pk=submitted.json()["id"]).created_by_id == personas.ci_a.pk

    event = AuditEvent.objects.get(action="token.exchange")
    claims = event.after["claims"]
    assert claims["iss"] == oidc_provider.issuer
    assert claims["sub"] == "project_path:ml/llm-train:ref_type:branch:ref:main"
    assert claims["project_path"] == "ml/llm-train"
    assert claims["ref_protected"] == "true"
    assert body["access_token"] not in json.dumps(event.after)


def test_a_form_body_and_the_jwt_token_type_are_accepted(api, oidc_provider, trust):
    response = _exchange(
        api, _job_token(oidc_provider), as_form=True, token_type="urn:ietf:params:oauth:token-type:jwt"
    )
    assert response.status_code == 200, response.content


def _tampered(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["project_path"] = "ml/llm-train"
    claims["sub"] = "someone-else"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


# Each case, and the reason the audit event gives (the caller is told the same thing for all of them).
REFUSED = {
    "unprotected ref": (lambda p: _job_token(p, ref_protected="false"), "no trust"),
    "another project": (lambda p: _job_token(p, project_path="ml/other"), "no trust"),
    "wrong audience": (lambda p: _job_token(p, aud="https://elsewhere.example.test"), "no trust"),
    "expired": (lambda p: _job_token(p, exp_in=-120), "expired"),
    "tampered signature": (lambda p: _tampered(_job_token(p, project_path="ml/other")), "Signature verification"),
    "unknown issuer": (lambda p: _job_token(p, iss_override="https://gitlab.example.test"), "no enabled trust"),
    "not a JWT": (lambda p: "not-a-jwt", "not a JWT"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_token_that_does_not_match_gets_the_same_401(api, oidc_provider, trust, case):
    make, reason = REFUSED[case]
    subject = make(oidc_provider)
    response = _exchange(api, subject)
    assert response.status_code == 401, response.content
    body = response.json()
    assert body["code"] == body["error"] == "invalid_grant"
    assert body["message"] == "The subject token is not accepted."
    assert not ApiToken.objects.filter(name__startswith="token exchange").exists()
    event = AuditEvent.objects.get(action="token.exchange_refused")
    assert reason in event.after["reason"]
    assert subject not in json.dumps(event.after)


def test_a_disabled_trust_accepts_nothing(api, oidc_provider, trust):
    FederatedTrust.objects.filter(pk=trust.pk).update(enabled=False)
    assert _exchange(api, _job_token(oidc_provider)).status_code == 401


def test_a_deactivated_service_account_is_given_nothing(api, oidc_provider, trust, personas):
    User.objects.filter(pk=personas.ci_a.pk).update(is_active=False)
    assert _exchange(api, _job_token(oidc_provider)).status_code == 401
    assert "no enabled trust" in AuditEvent.objects.get(action="token.exchange_refused").after["reason"]


def test_the_issued_token_expires_after_its_minutes(api, oidc_provider, trust, personas):
    raw = _exchange(api, _job_token(oidc_provider)).json()["access_token"]
    assert api(token=raw).get("/api/v1/me/").status_code == 200
    ApiToken.objects.filter(user=personas.ci_a, name__startswith="token exchange").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert api(token=raw).get("/api/v1/me/").status_code == 401


def test_the_lifetime_is_capped_by_the_setting(api, settings, oidc_provider, trust):
    settings.TOKEN_EXCHANGE_MAX_MINUTES = 5
    assert _exchange(api, _job_token(oidc_provider)).json()["expires_in"] == 300


def test_a_malformed_request_is_a_400_naming_the_field(api):
    response = api().post(EXCHANGE, {"grant_type": "password", "subject_token": "x"}, format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"grant_type", "subject_token_type"}


#
# The trusts: API, permissions, audit, outbound policy
#


def test_tenant_admins_create_list_and_delete_trusts_each_audited(api, personas):
    admin = api(fresh(personas.tenant_admin_a))
    created = admin.post(
        "/api/v1/federated-trusts/",
        {
            "service_account": "ci-a",
            "issuer": "https://gitlab.example.test",
            "audience": AUDIENCE,
            "conditions": CONDITIONS,
            "max_minutes": 20,
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["conditions"] == CONDITIONS
    assert [t["id"] for t in admin.get("/api/v1/federated-trusts/").json()["results"]] == [created.json()["id"]]
    assert api(fresh(personas.member_a)).get("/api/v1/federated-trusts/").json()["results"] == []
    assert api(fresh(personas.member_b)).delete(f"/api/v1/federated-trusts/{created.json()['id']}/").status_code == 404
    assert admin.delete(f"/api/v1/federated-trusts/{created.json()['id']}/").status_code == 204
    assert list(
        AuditEvent.objects.filter(action__startswith="federated_trust.").order_by("pk").values_list("action", flat=True)
    ) == ["federated_trust.create", "federated_trust.delete"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("issuer", "http://169.254.169.254/latest"),
        ("issuer", "ftp://gitlab.example.test"),
        ("audience", " "),
        ("conditions", {"ref_protected": 1}),
        ("conditions", ["ref_protected"]),
        ("max_minutes", 0),
        ("max_minutes", 61),
    ],
)
def test_a_bad_trust_is_refused_naming_the_field(api, personas, field, value):
    body = {"service_account": "ci-a", "issuer": "https://gitlab.example.test", "audience": AUDIENCE, field: value}
    response = api(fresh(personas.tenant_admin_a)).post("/api/v1/federated-trusts/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"]
    assert not FederatedTrust.objects.exists()


def test_a_person_cannot_be_given_a_trust(api, personas):
    body = {"service_account": "member-a", "issuer": "https://gitlab.example.test", "audience": AUDIENCE}
    response = api(fresh(personas.tenant_admin_a)).post("/api/v1/federated-trusts/", body, format="json")
    assert response.status_code == 400
    assert not FederatedTrust.objects.exists()


def test_a_member_cannot_create_a_trust(api, personas):
    body = {"service_account": "ci-a", "issuer": "https://gitlab.example.test", "audience": AUDIENCE}
    response = api(fresh(personas.member_a)).post("/api/v1/federated-trusts/", body, format="json")
    assert response.status_code == 403
    assert not FederatedTrust.objects.exists()


def test_a_trusted_issuer_that_cannot_be_reached_is_a_503_to_retry(api, personas):
    """The pipeline's token may be good: the console cannot check it now. 503 with Retry-After (a CI step retries),
    not the 401 that tells it to give up; audited like a refusal, and nothing issued."""
    import socket

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        issuer = f"http://127.0.0.1:{closed.getsockname()[1]}"
    federation.forget()
    accounts.create_federated_trust(
        fresh(personas.tenant_admin_a),
        service_account=personas.ci_a,
        issuer=issuer,
        audience=AUDIENCE,
        conditions=CONDITIONS,
        max_minutes=10,
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(timezone.now().timestamp())
    claims = {"iss": issuer, "aud": AUDIENCE, "sub": "job", "iat": now, "exp": now + 300}
    response = _exchange(api, jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"}))
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "30"
    assert response.json()["error"] == "temporarily_unavailable"
    assert not ApiToken.objects.filter(name__startswith="token exchange").exists()
    assert "keys cannot be read" in AuditEvent.objects.get(action="token.exchange_refused").after["reason"]
