"""API tokens: shown once, stored hashed, scoped, revocable, expiring, last use recorded."""

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from apps.accounts.models import ApiToken, token_digest
from apps.accounts.services import issue_token, revoke_token
from apps.audit.models import AuditEvent
from apps.core.errors import Forbidden, InvalidInput
from tests.utils.personas import fresh


def test_token_is_stored_hashed_and_shown_once(personas, api):
    admin = fresh(personas.tenant_admin_a)
    response = api(admin).post("/api/v1/tokens/", {"name": "pipeline", "tenant": "a", "role": "member"}, format="json")
    assert response.status_code == 201, response.json()
    raw = response.json()["token"]
    assert raw.startswith("gpuc_") and len(raw) > 40
    row = ApiToken.objects.get(pk=response.json()["id"])
    assert row.digest == token_digest(raw) and raw not in row.digest
    listing = api(admin).get(f"/api/v1/tokens/{row.pk}/").json()
    assert "token" not in listing and listing["prefix"] == raw[:12]
    assert raw not in str(AuditEvent.objects.filter(action="token.create").values())


def test_bearer_token_authenticates_and_records_last_use(personas, api):
    assert personas.token_a.last_used_at is None
    response = api(token=personas.token_a_raw).get("/api/v1/me/")
    assert response.status_code == 200
    body = response.json()
    assert body["username"] == "ci-a" and body["token"]["tenant"] == "a"
    assert body["permissions"] == {"console": [], "tenants": {"a": ["submit", "view"]}}
    personas.token_a.refresh_from_db()
    assert personas.token_a.last_used_at is not None


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("Bearer gpuc_not-a-real-token", "Invalid API token."),
        ("Bearer nonsense", "Invalid API token."),
        ("Bearer a b", "Malformed Authorization header; use 'Bearer <token>'."),
    ],
)
def test_unknown_or_malformed_token_is_401_json(personas, api, header, message):
    client = api()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/tenants/")
    assert response.status_code == 401
    assert response.json()["message"] == message
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_revoked_token_is_401(personas, api):
    revoke_token(fresh(personas.tenant_admin_a), personas.token_a, reason="leaked in a log")
    response = api(token=personas.token_a_raw).get("/api/v1/tenants/")
    assert response.status_code == 401
    assert response.json() == {
        **response.json(),
        "message": "This API token was revoked.",
        "code": "authentication_failed",
    }


def test_expired_token_is_401(personas, api):
    admin = fresh(personas.tenant_admin_a)
    token, raw = issue_token(admin, user=admin, name="short", tenant=personas.a, role="member", expires_in_days=1)
    assert api(token=raw).get("/api/v1/me/").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = api(token=raw).get("/api/v1/me/")
    assert response.status_code == 401 and response.json()["message"] == "This API token has expired."


def test_no_credentials_is_401(db, api):
    response = api().get("/api/v1/tenants/")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_token_cannot_exceed_its_user(personas):
    member = fresh(personas.member_a)
    with pytest.raises(Forbidden):
        issue_token(member, user=member, name="x", tenant=personas.a, role="tenant-admin")
    with pytest.raises(Forbidden):
        issue_token(member, user=member, name="x", tenant=personas.b, role="member")
    with pytest.raises(Forbidden):  # someone else's token
        issue_token(member, user=fresh(personas.viewer_a), name="x", tenant=personas.a, role="viewer")


def test_tenant_admin_issues_for_own_service_account_only(personas):
    from apps.accounts.services import create_service_account

    other = create_service_account(fresh(personas.platform_admin), username="ci-b", tenant=personas.b, role="member")
    with pytest.raises(Forbidden):
        issue_token(fresh(personas.tenant_admin_a), user=other, name="x", tenant=personas.b, role="member")
    token, _ = issue_token(
        fresh(personas.tenant_admin_a), user=fresh(personas.ci_a), name="y", tenant=personas.a, role="viewer"
    )
    assert token.user_id == personas.ci_a.pk


def test_token_validation_errors(personas):
    admin = fresh(personas.tenant_admin_a)
    with pytest.raises(InvalidInput) as exc:
        issue_token(admin, user=admin, name="", tenant=personas.a, role="member")
    assert "name" in exc.value.fields
    with pytest.raises(InvalidInput) as exc:
        issue_token(admin, user=admin, name="n", tenant=personas.a, role="member", expires_in_days=0)
    assert "expires_in_days" in exc.value.fields
    with pytest.raises(InvalidInput) as exc:
        issue_token(admin, user=admin, name="n", tenant=None, role="member")
    assert "tenant" in exc.value.fields


def test_a_token_cannot_mint_a_wider_token(personas, api):
    response = api(token=personas.token_a_raw).post(
        "/api/v1/tokens/", {"name": "escalate", "tenant": "a", "role": "tenant-admin"}, format="json"
    )
    assert response.status_code == 403
    response = api(token=personas.token_a_raw).post(
        "/api/v1/tokens/", {"name": "same", "tenant": "a", "role": "member"}, format="json"
    )
    assert response.status_code == 403  # a member token cannot manage, so it cannot mint


def test_revoke_twice_is_a_conflict_with_one_event(personas, api):
    client = api(fresh(personas.tenant_admin_a))
    url = f"/api/v1/tokens/{personas.token_a.pk}/revoke/"
    assert client.post(url, {"reason": "rotate"}, format="json").status_code == 200
    assert client.post(url, {}, format="json").status_code == 409
    assert AuditEvent.objects.filter(action="token.revoke").count() == 1


def test_member_cannot_revoke_someone_elses_token(personas, api):
    response = api(fresh(personas.member_a)).post(f"/api/v1/tokens/{personas.token_a.pk}/revoke/", {}, format="json")
    assert response.status_code == 404  # not even visible
    personas.token_a.refresh_from_db()
    assert personas.token_a.revoked_at is None


def test_issue_token_command_prints_a_working_token(personas, api, capsys):
    call_command("issue_token", "--user", "ci-a", "--tenant", "a", "--expires", "30")
    raw = capsys.readouterr().out.strip()
    assert raw.startswith("gpuc_")
    token = ApiToken.objects.get(digest=token_digest(raw))
    assert token.role == "member" and token.tenant == personas.a and token.expires_at is not None
    assert api(token=raw).get("/api/v1/me/").status_code == 200


def test_issue_token_command_refuses_what_the_user_does_not_hold(personas):
    with pytest.raises(CommandError, match="does not hold tenant-admin"):
        call_command("issue_token", "--user", "member-a", "--tenant", "a", "--role", "tenant-admin")
    with pytest.raises(CommandError, match="No tenant"):
        call_command("issue_token", "--user", "member-a", "--tenant", "nope")
    with pytest.raises(CommandError, match="No user"):
        call_command("issue_token", "--user", "ghost")


def test_token_lookup_in_one_statement_equals_the_orms(personas, django_assert_num_queries):
    from apps.accounts.authentication import find_token
    from apps.accounts.models import Membership
    from apps.accounts.permissions import GRANTS_ATTR, user_grants

    member = fresh(personas.member_a)
    scoped, raw = issue_token(member, user=member, name="ci", tenant=personas.a, role="member")
    admin = fresh(personas.platform_admin)
    unscoped, raw2 = issue_token(admin, user=admin, name="any", role="platform-admin")
    for row, secret in [(scoped, raw), (unscoped, raw2)]:
        member = row.user
        with django_assert_num_queries(1):
            found = find_token(token_digest(secret))
            assert found.user.username == row.user.username  # no further query for the user or the tenant
            assert found.tenant == (personas.a if row.tenant_id else None)
        orm = ApiToken.objects.select_related("user", "tenant").get(pk=row.pk)
        for model_obj, expected in [(found, orm), (found.user, orm.user)] + (
            [(found.tenant, orm.tenant)] if row.tenant_id else []
        ):
            fields = type(expected)._meta.concrete_fields
            assert [getattr(model_obj, f.attname) for f in fields] == [getattr(expected, f.attname) for f in fields]
        memberships = sorted(Membership.objects.filter(user=member).values_list("tenant_id", "role"))
        assert sorted(getattr(found.user, GRANTS_ATTR)) == memberships
        read = sorted(user_grants(fresh(row.user)))  # the query path
        with django_assert_num_queries(0):
            assert sorted(user_grants(found.user)) == read
    assert find_token(token_digest("gpuc_nope")) is None


def test_a_platform_admin_revokes_anyones_token_audited(personas, api, client):
    """A person's own token (not a service account's) leaked while they are away: a platform admin revokes it from
    the API or the tokens page; the event names who revoked whose token. A tenant admin still may not."""
    member = fresh(personas.member_a)
    _row, raw = issue_token(member, user=member, name="laptop", tenant=personas.a, role="member")
    laptop = ApiToken.objects.get(name="laptop")
    refused = api(fresh(personas.tenant_admin_a)).post(f"/api/v1/tokens/{laptop.pk}/revoke/", {}, format="json")
    assert refused.status_code in (403, 404)
    revoked = api(fresh(personas.platform_admin)).post(
        f"/api/v1/tokens/{laptop.pk}/revoke/", {"reason": "pasted in a public issue"}, format="json"
    )
    assert revoked.status_code == 200, revoked.json()
    assert api(token=raw).get("/api/v1/me/").status_code == 401
    event = AuditEvent.objects.get(action="token.revoke", target_id=str(laptop.pk))
    assert (event.actor_label, event.reason) == ("root", "pasted in a public issue")
    assert event.after["owner"] == member.username and event.after["user"] == member.pk
    # The page that lists every token offers the same revoke, with a reason.
    _row, raw = issue_token(member, user=member, name="desktop", tenant=personas.a, role="member")
    desktop = ApiToken.objects.get(name="desktop")
    client.force_login(personas.platform_admin)
    listed = client.get("/accounts/tokens/").content.decode()
    assert f"/accounts/tokens/{desktop.pk}/revoke/" in listed
    page = client.post(f"/accounts/tokens/{desktop.pk}/revoke/", {"reason": "rotated by ops"}, follow=True)
    assert "Revoked token desktop." in page.content.decode()
    desktop.refresh_from_db()
    assert desktop.revoked_at is not None
    assert AuditEvent.objects.filter(action="token.revoke", target_id=str(desktop.pk), reason="rotated by ops").exists()


def test_every_token_expires_by_default_after_the_maximum_lifetime(personas, api, settings):
    assert settings.API_TOKEN_MAX_LIFETIME_DAYS == 365
    admin = fresh(personas.tenant_admin_a)
    before = timezone.now()
    body = {"name": "no expiry asked", "tenant": "a", "role": "member"}
    response = api(admin).post("/api/v1/tokens/", body, format="json")
    assert response.status_code == 201, response.json()
    expires_at = ApiToken.objects.get(pk=response.json()["id"]).expires_at
    assert before + timedelta(days=365) <= expires_at <= timezone.now() + timedelta(days=365)
    explicit_null = {"name": "null", "tenant": "a", "role": "member", "expires_in_days": None}
    assert api(admin).post("/api/v1/tokens/", explicit_null, format="json").json()["expires_at"] is not None


@pytest.mark.parametrize("days", [366, 3650, 100_000])
def test_a_longer_lifetime_than_the_maximum_is_a_clear_400(personas, api, days):
    admin = fresh(personas.tenant_admin_a)
    body = {"name": "forever", "tenant": "a", "role": "member", "expires_in_days": days}
    response = api(admin).post("/api/v1/tokens/", body, format="json")
    assert response.status_code == 400
    assert response.json()["message"] == "Expiry must be 1 to 365 days (the console's longest token lifetime)."
    assert response.json()["fields"] == {"expires_in_days": ["1 to 365."]}
    assert not ApiToken.objects.filter(name="forever").exists()


def test_the_maximum_lifetime_is_a_setting(personas, settings):
    settings.API_TOKEN_MAX_LIFETIME_DAYS = 30
    admin = fresh(personas.tenant_admin_a)
    token, _ = issue_token(admin, user=admin, name="default", tenant=personas.a, role="member")
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    with pytest.raises(InvalidInput, match="1 to 30 days"):
        issue_token(admin, user=admin, name="n", tenant=personas.a, role="member", expires_in_days=31)
    call_command("issue_token", "--user", "ci-a", "--tenant", "a")
    assert ApiToken.objects.filter(expires_at__isnull=True).count() == 0


def test_tokens_issued_before_the_maximum_get_it_from_the_upgrade(personas):
    """Migration accounts.0003: a never-expiring token gets the full maximum lifetime counted from the upgrade."""
    from importlib import import_module

    from django.apps import apps
    from django.db import connection

    ApiToken.objects.filter(pk=personas.token_a.pk).update(expires_at=None)
    already = timezone.now() + timedelta(days=3)
    ApiToken.objects.exclude(pk=personas.token_a.pk).update(expires_at=already)
    migration = import_module("apps.accounts.migrations.0003_tokens_expire")
    with connection.schema_editor() as editor:
        migration.give_every_token_an_expiry(apps, editor)
    personas.token_a.refresh_from_db()
    assert timedelta(days=364) < personas.token_a.expires_at - timezone.now() <= timedelta(days=365)
    assert set(ApiToken.objects.exclude(pk=personas.token_a.pk).values_list("expires_at", flat=True)) <= {already}
