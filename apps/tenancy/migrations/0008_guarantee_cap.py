# TenantBudget becomes GuaranteeCap: the most guarantee a tenant's subtree may hold per GPU model, not to be
# mistaken for chargeback's SpendBudget (money). Rows stay; the table is renamed (tenancy_tenantbudget →
# tenancy_guaranteecap; its primary key, sequence and foreign-key index keep their old names, which nothing
# reads). The unique constraint takes the new name (a few rows: tenants × GPU models). The reverse accessor
# on Tenant and the verbose name (kept: "tenant budget") change in Django's state only. Pages, the API
# (/api/v1/budgets/) and audit events (target type "tenancy.tenantbudget", action "budget.set") keep their
# names.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("tenancy", "0007_admission_hold"),
    ]

    operations = [
        migrations.RenameModel(old_name="TenantBudget", new_name="GuaranteeCap"),
        migrations.AlterModelOptions(name="guaranteecap", options={"verbose_name": "tenant budget"}),
        migrations.AlterField(
            model_name="guaranteecap",
            name="tenant",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="guarantee_caps", to="accounts.tenant"
            ),
        ),
        migrations.RemoveConstraint(model_name="guaranteecap", name="budget_one_per_model"),
        migrations.AddConstraint(
            model_name="guaranteecap",
            constraint=models.UniqueConstraint(fields=("tenant", "gpu_model"), name="guarantee_cap_one_per_model"),
        ),
    ]
