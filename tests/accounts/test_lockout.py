"""Log-in lockout (issue 20: "50 wrong passwords in 20 s, then the right one worked").

Failures count per user name and client address; after LOGIN_FAILURE_LIMIT the pair is refused, right
password included, until the cool-off has passed; other users and other addresses are not affected.
"""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client
from django.urls import reverse

from apps.audit.models import AuditEvent
from tests.utils.personas import PASSWORD

LOGIN = reverse("login")
ATTACKER = "203.0.113.7"


def log_in(username: str, password: str, address: str = ATTACKER, client: Client | None = None):
    return (client or Client()).post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def logged_in(response) -> bool:
    return response.status_code == 302 and "_auth_user_id" in response.client.session


def test_defaults_lock_after_ten_failures_for_fifteen_minutes():
    assert settings.AXES_FAILURE_LIMIT == 10
    assert settings.AXES_COOLOFF_TIME.total_seconds() == 15 * 60
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]


def test_fifty_wrong_passwords_lock_the_user_at_that_address_until_the_cooloff(personas):
    user = personas.member_a.username
    statuses = [log_in(user, f"wrong-{i}").status_code for i in range(50)]
    limit = settings.AXES_FAILURE_LIMIT
    # The form answers 200 (wrong password) until the limit; the failure that reaches it and every later try: 429.
    assert statuses[: limit - 1] == [200] * (limit - 1)
    assert set(statuses[limit - 1 :]) == {429}

    refused = log_in(user, PASSWORD)
    assert refused.status_code == 429 and not logged_in(refused)
    page = refused.content.decode()
    assert 'data-testid="lockout"' in page and "Too many failed log-ins" in page and "15 minutes" in page

    # Another user from the same address, and the same user from another address, log in as usual.
    assert logged_in(log_in(personas.member_b.username, PASSWORD))
    assert logged_in(log_in(user, PASSWORD, address="198.51.100.9"))

    # The lock was audited once, naming the user and the address, not once per refused try.
    events = AuditEvent.objects.filter(action="user.lockout")
    assert events.count() == 1
    event = events.get()
    assert event.target_id == str(personas.member_a.pk)
    assert event.after["ip_address"] == ATTACKER and event.after["failures"] == limit

    # Once the cool-off has passed (the attempts are older than it), the right password works again.
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - settings.AXES_COOLOFF_TIME)
    assert logged_in(log_in(user, PASSWORD))


def test_a_success_before_the_limit_starts_the_count_again(personas):
    user = personas.member_a.username
    for i in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(user, f"wrong-{i}")
    assert logged_in(log_in(user, PASSWORD))
    assert [log_in(user, "wrong").status_code for _ in range(settings.AXES_FAILURE_LIMIT - 1)] == [200] * (
        settings.AXES_FAILURE_LIMIT - 1
    )


def test_an_unknown_user_name_is_locked_too_and_audited_by_name(db):
    for i in range(settings.AXES_FAILURE_LIMIT):
        log_in("nobody-here", f"guess-{i}")
    event = AuditEvent.objects.get(action="user.lockout")
    assert event.target_id == "" and event.target_label == "nobody-here"


@pytest.mark.parametrize("limit", [3])
def test_the_limit_and_cooloff_are_settings(personas, settings, limit):
    settings.AXES_FAILURE_LIMIT = limit
    user = personas.member_a.username
    assert [log_in(user, "wrong").status_code for _ in range(limit)] == [200] * (limit - 1) + [429]


def test_the_lockout_message_is_translated(personas):
    client = Client()
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    for i in range(settings.AXES_FAILURE_LIMIT):
        response = log_in(personas.member_a.username, f"wrong-{i}", client=client)
    assert response.status_code == 429
    page = response.content.decode()
    assert "Too many failed log-ins" not in page and "15 分钟内拒绝登录" in page
