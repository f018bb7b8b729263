"""Budgets that are spent and stop preemptible work now say so through tenancy's admission hold.

Submission used to read `SpendBudget.over_since` and `block_preemptible_when_over` itself; it reads the
hold now, which chargeback keeps (apps/chargeback/budgets.py::sync_hold). Existing databases get the holds
their budgets imply, so that a tenant paused before the upgrade stays paused.
"""

from django.db import migrations


def forwards(apps, schema_editor):
    SpendBudget = apps.get_model("chargeback", "SpendBudget")
    AdmissionHold = apps.get_model("tenancy", "AdmissionHold")
    for budget in SpendBudget.objects.filter(block_preemptible_when_over=True, over_since__isnull=False):
        AdmissionHold.objects.update_or_create(
            tenant_id=budget.tenant_id,
            defaults={"since": budget.over_since, "amount": budget.monthly_amount, "currency": budget.currency},
        )


class Migration(migrations.Migration):
    dependencies = [
        ("chargeback", "0004_tenant_in_accounts"),
        ("tenancy", "0007_admission_hold"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
