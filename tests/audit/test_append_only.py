"""Audit events cannot be edited or deleted: not by the ORM, not by raw SQL, not in the admin."""

import pytest
from django.db import DatabaseError, connection, transaction

from apps.audit.models import AppendOnlyError, AuditEvent
from apps.audit.services import record_event
from tests.utils.personas import fresh


def test_orm_refuses_update_and_delete(personas):
    event = AuditEvent.objects.first()
    event.reason = "rewritten"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.filter(pk=event.pk).update(reason="x")
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().delete()


@pytest.mark.parametrize("sql", ["UPDATE audit_auditevent SET reason = 'x'", "DELETE FROM audit_auditevent"])
def test_database_trigger_refuses_raw_sql(personas, sql):
    count = AuditEvent.objects.count()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)
    assert AuditEvent.objects.count() == count
    assert not AuditEvent.objects.filter(reason="x").exists()


def test_record_event_requires_a_transaction(personas):
    """An event written outside the service's transaction could commit without its change: refused."""
    saved = connection.in_atomic_block
    connection.in_atomic_block = False  # pytest-django wraps each test in a transaction; step outside it
    try:
        with pytest.raises(RuntimeError, match="transaction"):
            record_event(fresh(personas.member_a), "x.y", personas.a)
    finally:
        connection.in_atomic_block = saved


def test_event_carries_actor_token_request_and_diff(personas, api):
    client = api(token=personas.token_a_raw)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {personas.token_a_raw}", HTTP_X_REQUEST_ID="ci-run-42")
    response = client.post("/api/v1/tokens/", {"name": "self", "tenant": "a", "role": "viewer"}, format="json")
    assert response.status_code == 403  # member tokens cannot mint
    admin = api(fresh(personas.tenant_admin_a))
    admin.credentials(HTTP_X_REQUEST_ID="ci-run-43")
    admin.patch("/api/v1/tenants/a-team/", {"name": "Renamed", "reason": "reorg"}, format="json")
    event = AuditEvent.objects.get(request_id="ci-run-43")
    assert event.action == "tenant.update" and event.reason == "reorg"
    assert event.before["name"] == "Team A1" and event.after["name"] == "Renamed"
    assert event.tenant_id == personas.a_team.pk and event.actor_id == personas.tenant_admin_a.pk


def test_token_actor_is_labelled(personas, api):
    from apps.accounts.services import issue_token

    ta = fresh(personas.tenant_admin_a)
    _, raw = issue_token(ta, user=ta, name="adm", tenant=personas.a, role="tenant-admin")
    api(token=raw).patch("/api/v1/tenants/a-team/", {"description": "via token"}, format="json")
    event = AuditEvent.objects.filter(action="tenant.update").get()
    assert event.token_id is not None and "(token gpuc_" in event.actor_label


def test_admin_shows_events_read_only(personas, client):
    personas.platform_admin.is_staff = True
    client.force_login(personas.platform_admin)
    event = AuditEvent.objects.first()
    assert client.get("/admin/audit/auditevent/").status_code == 200
    assert client.get(f"/admin/audit/auditevent/{event.pk}/change/").status_code == 200
    assert client.post(f"/admin/audit/auditevent/{event.pk}/change/", {"reason": "x"}).status_code == 403
    assert client.post(f"/admin/audit/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.get("/admin/audit/auditevent/add/").status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk, reason="").exists()


def test_admin_is_for_platform_admins_only(personas, client):
    from apps.accounts.models import User

    User.objects.filter(pk=personas.tenant_admin_a.pk).update(is_staff=True)
    client.force_login(personas.tenant_admin_a)
    assert client.get("/admin/").status_code == 302  # sent to the admin login
    client.force_login(personas.platform_admin)
    assert client.get("/admin/").status_code == 200


def test_admin_user_edit_is_audited_once(personas, client):
    client.force_login(personas.platform_admin)
    user = personas.member_a
    before = AuditEvent.objects.count()
    response = client.post(
        f"/admin/accounts/user/{user.pk}/change/",
        {
            "username": user.username,
            "email": "new@example.com",
            "first_name": "",
            "last_name": "",
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "1",
            "memberships-MIN_NUM_FORMS": "0",
            "memberships-MAX_NUM_FORMS": "1000",
            "memberships-0-id": str(user.memberships.get().pk),
            "memberships-0-user": str(user.pk),
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert AuditEvent.objects.count() == before + 1
    event = AuditEvent.objects.order_by("-id").first()
    assert event.action == "admin.accounts.user.change"
    assert event.before["email"] == "" and event.after["email"] == "new@example.com"
    assert "password" not in event.after


def test_admin_periodic_task_edit_is_audited(personas, client):
    from django_celery_beat.models import IntervalSchedule

    client.force_login(personas.platform_admin)
    response = client.post(
        "/admin/django_celery_beat/intervalschedule/add/",
        {
            "every": "5",
            "period": "minutes",
            "periodictask_set-TOTAL_FORMS": "0",
            "periodictask_set-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, list(response.context["errors"])
    schedule = IntervalSchedule.objects.get(every=5)
    event = AuditEvent.objects.order_by("-id").first()
    assert event.action == "admin.django_celery_beat.intervalschedule.create"
    assert event.target_id == str(schedule.pk)
