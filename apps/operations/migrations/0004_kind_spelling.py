# Operation kinds are spelled `<app>.<verb-noun>`, the app being the one whose handler runs the kind. The
# quota push and drift report were "fleet.quota_push" and "fleet.quota_drift" (underscores, and tenancy owns
# their handlers now): stored rows take the new names. Reversible. Audit events are append-only and keep
# the kind they were written with ("operation.start" events' `after.kind`).
#
# The mapping is written out here, not imported: a migration must mean the same thing whatever the code
# around it becomes.

from django.db import migrations

RENAMED = {
    "fleet.quota_push": "tenancy.quota-push",
    "fleet.quota_drift": "tenancy.quota-drift",
}


def _rename(apps, mapping: dict[str, str]) -> None:
    Operation = apps.get_model("operations", "Operation")
    for old, new in mapping.items():
        Operation.objects.filter(kind=old).update(kind=new)


def forwards(apps, schema_editor):
    _rename(apps, RENAMED)


def backwards(apps, schema_editor):
    _rename(apps, {new: old for old, new in RENAMED.items()})


class Migration(migrations.Migration):

    dependencies = [
        ("operations", "0003_tenant_in_accounts"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
