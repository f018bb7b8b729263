"""On PostgreSQL, refuse any change to usage records and credits of a closed period, whoever makes it.

The services refuse first with a clear message; this trigger is the backstop for everything else
(a raw UPDATE, the admin, a bug). Changing a period's state itself stays possible (reopening).
SQLite (the demo) relies on the services alone.
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION chargeback_refuse_closed_period() RETURNS trigger AS $$
DECLARE
    closed boolean;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        SELECT state = 'closed' INTO closed FROM chargeback_period WHERE id = OLD.period_id;
        IF closed THEN
            RAISE EXCEPTION 'chargeback period % is closed: its % rows cannot change', OLD.period_id, TG_TABLE_NAME
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        SELECT state = 'closed' INTO closed FROM chargeback_period WHERE id = NEW.period_id;
        IF closed THEN
            RAISE EXCEPTION 'chargeback period % is closed: no % rows can be added to it', NEW.period_id, TG_TABLE_NAME
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""
TABLES = ("chargeback_usagerecord", "chargeback_usageday", "chargeback_credit")


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(FUNCTION, params=None)
    for table in TABLES:
        schema_editor.execute(
            f"CREATE TRIGGER {table}_closed_period BEFORE INSERT OR UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION chargeback_refuse_closed_period()"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_closed_period ON {table}")
    schema_editor.execute("DROP FUNCTION IF EXISTS chargeback_refuse_closed_period()")


class Migration(migrations.Migration):
    dependencies = [("chargeback", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards)]
