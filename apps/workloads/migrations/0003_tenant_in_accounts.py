# The tenant model moved to apps.accounts with its table (tenancy_tenant): the foreign keys keep
# their columns and constraints, only their target in Django's state changes.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0002_tenant"),
        ("workloads", "0002_slim_write_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="workload",
                    name="tenant",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="workloads", to="accounts.tenant"),
                ),
                migrations.AlterField(
                    model_name="workloadtemplate",
                    name="tenant",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="workload_templates", to="accounts.tenant"),
                ),
            ],
            database_operations=[],
        ),
    ]
