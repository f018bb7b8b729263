# The tenant model now lives in apps.accounts (accounts' 0002), on the same table. Once every foreign
# key in every app points there, drop the old model from Django's state; the table and its rows stay.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0002_tenant"),
        ("tenancy", "0005_slim_write_indexes"),
        # Every other app's foreign keys to the tenant must have moved before the old model goes.
        ("audit", "0004_tenant_in_accounts"),
        ("chargeback", "0004_tenant_in_accounts"),
        ("health", "0003_tenant_in_accounts"),
        ("operations", "0003_tenant_in_accounts"),
        ("workloads", "0003_tenant_in_accounts"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="tenantbudget",
                    name="tenant",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="budgets", to="accounts.tenant"),
                ),
                migrations.AlterField(
                    model_name="queue",
                    name="tenant",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="queues", to="accounts.tenant"),
                ),
                migrations.DeleteModel(name="Tenant"),
            ],
            database_operations=[],
        ),
    ]
