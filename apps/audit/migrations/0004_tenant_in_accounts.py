# The tenant model moved to apps.accounts with its table: the foreign key's target changes in
# Django's state only (it has no database constraint anyway).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0002_tenant"),
        ("audit", "0003_slim_write_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="auditevent",
                    name="tenant",
                    field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="accounts.tenant"),
                ),
            ],
            database_operations=[],
        ),
    ]
