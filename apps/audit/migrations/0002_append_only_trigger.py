"""Refuse UPDATE and DELETE of audit events in the database itself
(PostgreSQL and the demo's SQLite).

The model and queryset already refuse; the trigger also stops raw SQL, the admin, and any future
code path. TRUNCATE (used by test teardown) is not row-level and stays possible for the DBA.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION audit_event_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = 'audit events are append-only: ' || TG_OP || ' refused';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER audit_event_append_only
    BEFORE UPDATE OR DELETE ON audit_auditevent
    FOR EACH ROW EXECUTE FUNCTION audit_event_append_only();
"""

DROP = """
DROP TRIGGER IF EXISTS audit_event_append_only ON audit_auditevent;
DROP FUNCTION IF EXISTS audit_event_append_only();
"""


SQLITE_CREATE = [
    "CREATE TRIGGER audit_event_no_update BEFORE UPDATE ON audit_auditevent "
    "BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;",
    "CREATE TRIGGER audit_event_no_delete BEFORE DELETE ON audit_auditevent "
    "BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;",
]
SQLITE_DROP = ["DROP TRIGGER IF EXISTS audit_event_no_update;", "DROP TRIGGER IF EXISTS audit_event_no_delete;"]


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(CREATE)
    elif vendor == "sqlite":
        for statement in SQLITE_CREATE:
            schema_editor.execute(statement)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(DROP)
    elif vendor == "sqlite":
        for statement in SQLITE_DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
