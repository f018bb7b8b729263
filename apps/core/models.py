"""The core app's one table: wake-up flags raised inside a transaction (apps/core/wakeup.py)."""

from django.db import models


class WakeFlag(models.Model):
    """A coalesced wake-up's flag kept in PostgreSQL: raised by the statement that writes the work (so it is raised
    exactly when that work commits), cleared by the woken task before it looks. `raised_at` None: not raised."""

    key = models.CharField(max_length=100, primary_key=True)
    raised_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key}: {'raised' if self.raised_at else 'clear'}"
