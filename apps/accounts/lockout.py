"""Log-in lockout (django-axes): the backend that refuses a locked pair, the page that says so, its audit.

Failures are counted per user name and client address (`AXES_LOCKOUT_PARAMETERS`); after
`LOGIN_FAILURE_LIMIT` of them that pair is refused, the right password included, for
`LOGIN_COOLOFF_MINUTES` from the lock. Another user, or the same user from another address, is not
affected. The lock is audited once, as "user.lockout", when it happens.
"""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.dispatch import receiver
from django.shortcuts import render
from django.utils.translation import gettext as _


class LockoutBackend(AxesStandaloneBackend):
    """Axes' check before the model backend, for log-ins made through a request (the login page).

    `authenticate()` calls without a request (the test client's `login`, management commands) are not
    web log-ins and are left to the next backend, where Axes itself would refuse to work at all.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def cooloff_minutes() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)


def lockout_message(username: str) -> str:
    return _(
        "Too many failed log-ins for %(username)s from your address. Log-ins are refused for %(minutes)s minutes, "
        "even with the right password; try again later, or ask a platform admin."
    ) % {"username": username, "minutes": cooloff_minutes()}


def lockout_response(request, original_response=None, credentials=None):
    """The login page again, saying the log-in is locked and for how long; 429 Too Many Requests."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    form = AuthenticationForm(request, initial={"username": username})
    context = {"form": form, "next": request.POST.get("next", ""), "lockout_message": lockout_message(username)}
    return render(request, "accounts/login.html", context, status=429)


@receiver(user_locked_out, dispatch_uid="accounts.audit_lockout")
def audit_lockout(sender, request=None, username=None, ip_address=None, **kwargs) -> None:
    # Axes signals on the failure that locks and again on every refused try while locked; only the
    # locking failure has been counted (`axes_failures_since_start`), so the lock is audited once.
    if request is None or getattr(request, "axes_failures_since_start", None) is None:
        return
    from apps.accounts.services import record_lockout

    record_lockout(username or "", ip_address or "", failures=request.axes_failures_since_start)
