"""Celery beat that may run twice: django-celery-beat's DatabaseScheduler, sending only while it holds a lease.

A deployment runs two (or more) beat processes so that losing one loses no periodic work; only one of them may send,
or every periodic task would run twice. They share one row, `SchedulerLease`. A scheduler takes it, and the holder
renews it, with one conditional UPDATE:

    UPDATE operations_schedulerlease SET holder = me, expires_at = now() + lease
     WHERE id = 1 AND (holder = me OR expires_at < now())

timed by the database's clock (Django's `Now()`: STATEMENT_TIMESTAMP() on PostgreSQL), so the processes' own clocks
never decide who holds it. The row changes only when the UPDATE matches, so at any moment at most one holder has a lease
that has not expired in the database's time.

Each scheduler also keeps, on its own monotonic clock, the moment its lease is sure to be still valid: the time it
*sent* the UPDATE that took or renewed the lease, plus the lease, less a margin. The database's `expires_at` is
later than that (the statement ran after it was sent), so a scheduler that sends only before that moment never sends
while another holds the lease, even if it was frozen (SIGSTOP, a paused VM) or cut off from the database: after such
a pause its own clock says the lease is over, and it sends nothing until an UPDATE gives it the lease again. The
check is made right before each message is published.

The active scheduler renews every third of the lease; a standby tries as often, so it takes over at most a lease
(plus a third of one) after the active one stopped renewing. A scheduler that stops cleanly (SIGTERM, a rolling
update) hands the lease back at once. A standby that takes over re-reads the schedule from the database first, so
it continues from the last-run times the previous holder wrote instead of sending everything at once.

Configured by `CELERY_BEAT_SCHEDULER` (settings.py) and `BEAT_LEASE_S` (default 15 s).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, InterfaceError, connection
from django.db.models import Case, F, Q, When
from django.db.models.functions import Now
from django_celery_beat.schedulers import DatabaseScheduler

from apps.operations.models import SchedulerLease

logger = logging.getLogger(__name__)

# The part of a lease a holder does not use for sending: room for the send itself and for the two clocks' rates.
SAFETY_FRACTION = 0.1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def scheduler_identity() -> str:
    """host:pid:nonce, unique per scheduler even when pids repeat across containers."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"[:200]


def ensure_lease_row() -> None:
    """The lease's one row exists (expired, held by nobody) before anyone tries to take it."""
    SchedulerLease.objects.bulk_create(
        [SchedulerLease(id=SchedulerLease.ROW_ID, holder="", expires_at=_EPOCH)], ignore_conflicts=True
    )


def try_acquire(holder: str, lease_s: float) -> bool:
    """Take or renew the lease for `lease_s` seconds of database time; True when `holder` now holds it.

    One UPDATE: it matches only when `holder` already holds the lease or the lease has expired.
    """
    now = Now()
    taken = (
        SchedulerLease.objects.filter(id=SchedulerLease.ROW_ID)
        .filter(Q(holder=holder) | Q(expires_at__lt=now))
        .update(
            holder=holder,
            expires_at=now + timedelta(seconds=lease_s),
            acquired_at=Case(When(holder=holder, then=F("acquired_at")), default=now),
        )
    )
    return taken == 1


def release(holder: str) -> bool:
    """Hand the lease back (expired long ago) if `holder` holds it, so that a standby takes over at once."""
    return SchedulerLease.objects.filter(id=SchedulerLease.ROW_ID, holder=holder).update(expires_at=_EPOCH) == 1


class LeasedDatabaseScheduler(DatabaseScheduler):
    """DatabaseScheduler that ticks, and sends, only while it holds the schedule lease (module docstring)."""

    def __init__(self, *args, **kwargs):
        self.lease_s = float(settings.BEAT_LEASE_S)
        self.holder = scheduler_identity()
        self._holding = False
        self._standing_by = False
        self._send_until = 0.0  # monotonic: the lease is certainly ours before this
        self._refresh_at = 0.0  # monotonic: renew (or try to take) the lease then
        super().__init__(*args, **kwargs)
        # The last-run times go to the database at least every third of a lease (not every 3 minutes), so that a
        # standby taking over re-sends little of what was sent just before.
        self.sync_every = self.lease_s / 3
        if not kwargs.get("lazy"):  # `celery beat` builds a lazy one only to print its banner
            ensure_lease_row()
            logger.info("beat: scheduler %s, lease %.0f s", self.holder, self.lease_s)

    # The lease

    def holds_lease(self) -> bool:
        return self._holding and time.monotonic() < self._send_until

    def refresh_lease(self) -> None:
        """Renew the lease, or try to take it; one UPDATE."""
        sent = time.monotonic()
        self._refresh_at = sent + self.lease_s / 3
        try:
            held = try_acquire(self.holder, self.lease_s)
        except (DatabaseError, InterfaceError) as exc:
            # Unknown: the last lease stays valid until its own end (`_send_until`), and no longer.
            logger.warning("beat: could not renew the schedule lease: %s", exc)
            connection.close()  # the next try connects afresh (the server may have restarted)
            return
        if held:
            if not self._holding:
                logger.info("beat: %s took the schedule lease; sending", self.holder)
                self._take_over()
            self._send_until = sent + self.lease_s * (1 - SAFETY_FRACTION)
        elif not self._standing_by:
            logger.info("beat: %s does not hold the schedule lease; standing by", self.holder)
        self._holding = held
        self._standing_by = not held

    def _take_over(self) -> None:
        # The previous holder wrote the entries' last run times: start from them, not from what this process read
        # while it stood by (else every entry would look due at once).
        self._schedule = self.all_as_schedule()
        self._heap = None

    # Scheduler hooks

    def tick(self, *args, **kwargs):
        if time.monotonic() >= self._refresh_at:
            self.refresh_lease()
        if not self.holds_lease():
            return max(self._refresh_at - time.monotonic(), 0.05)
        delay = super().tick(*args, **kwargs)
        return min(delay, max(self._refresh_at - time.monotonic(), 0.0))

    def apply_entry(self, entry, producer=None):
        if not self.holds_lease():  # the last check before the message leaves (a pause may have come in between)
            logger.warning("beat: %s not sent: the schedule lease ran out before it", entry.name)
            return
        super().apply_entry(entry, producer=producer)

    def close(self):
        try:
            super().close()
        finally:
            if self._holding:
                self._holding = False
                try:
                    release(self.holder)
                    logger.info("beat: %s handed the schedule lease back", self.holder)
                except (DatabaseError, InterfaceError) as exc:
                    logger.warning("beat: could not hand the schedule lease back (it expires by itself): %s", exc)
