"""LOCAL_LOGIN off: password log-ins only for the break-glass accounts, on the log-in page and the Django admin's."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from tests.utils.personas import PASSWORD


@pytest.fixture
def sso_only(settings, personas):
    settings.LOCAL_LOGIN = False
    settings.LOCAL_LOGIN_BREAK_GLASS_USERS = ["root"]
    return personas


def _log_in(client, url: str, username: str):
    return client.post(url, {"username": username, "password": PASSWORD})


def test_a_person_is_told_to_use_single_sign_on_and_is_not_logged_in(client, sso_only):
    response = _log_in(client, reverse("login"), "member-a")
    assert response.status_code == 200
    assert "Password log-in is off: log in with single sign-on." in response.text
    assert "_auth_user_id" not in client.session
    assert not AuditEvent.objects.filter(action="user.login").exists()


def test_the_break_glass_account_still_logs_in(client, sso_only):
    response = _log_in(client, reverse("login"), "root")
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(sso_only.platform_admin.pk)


def test_the_admin_login_is_closed_too(client, sso_only, settings):
    settings.LOCAL_LOGIN_BREAK_GLASS_USERS = []
    response = _log_in(client, "/admin/login/", "root")
    assert response.status_code == 200
    assert "_auth_user_id" not in client.session


def test_with_local_login_on_everyone_logs_in_with_a_password(client, personas):
    assert _log_in(client, reverse("login"), "member-a").status_code == 302
