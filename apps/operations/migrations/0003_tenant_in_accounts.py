# The tenant model moved to apps.accounts with its table (tenancy_tenant): the foreign key keeps
# its column and constraint, only its target in Django's state changes.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0002_tenant"),
        ("operations", "0002_operation_steps"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="operation",
                    name="tenant",
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="accounts.tenant"),
                ),
            ],
            database_operations=[],
        ),
    ]
