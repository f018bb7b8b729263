"""`manage.py wait_for_migrations`, the console pods' init container: it returns once every migration of the code is
applied, waits meanwhile (an unreachable database included), and gives up naming what is missing."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError
from django.db.migrations.recorder import MigrationRecorder

from apps.core.management.commands import wait_for_migrations

pytestmark = pytest.mark.django_db


def test_returns_when_every_migration_is_applied(capsys):
    call_command("wait_for_migrations", "--timeout", "0")
    assert "Every migration is applied." in capsys.readouterr().out


def test_gives_up_naming_the_first_missing_migration():
    MigrationRecorder.Migration.objects.filter(app="operations", name="0005_scheduler_lease").delete()
    assert wait_for_migrations.unapplied_migrations() == ["operations.0005_scheduler_lease"]
    with pytest.raises(
        CommandError, match=r"Gave up after 0 s: 1 migration\(s\) not applied yet, the first operations"
    ):
        call_command("wait_for_migrations", "--timeout", "0")


def test_waits_for_the_database_and_the_migrations(monkeypatch, capsys):
    answers = [OperationalError("connection refused"), ["operations.0005_scheduler_lease"], []]

    def unapplied(alias):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(wait_for_migrations, "unapplied_migrations", unapplied)
    call_command("wait_for_migrations", "--timeout", "60", "--interval", "0")
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "Waiting: the database does not answer: connection refused",
        "Waiting: 1 migration(s) not applied yet, the first operations.0005_scheduler_lease",
        "Every migration is applied.",
    ]
