"""Models and migrations agree (a forgotten migration fails here, not in a deployment)."""

from io import StringIO

from django.core.management import call_command


def test_no_missing_migrations(db):
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=StringIO())
    assert "No changes detected" in out.getvalue()
