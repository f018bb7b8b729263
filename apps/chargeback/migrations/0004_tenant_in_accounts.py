# The tenant model moved to apps.accounts with its table (tenancy_tenant): the foreign keys keep
# their columns and constraints, only their target in Django's state changes.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0002_tenant"),
        ("chargeback", "0003_usage_group_statistics"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="credit",
                    name="tenant",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+", to="accounts.tenant"),
                ),
                migrations.AlterField(
                    model_name="spendbudget",
                    name="tenant",
                    field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="spend_budget", to="accounts.tenant"),
                ),
                migrations.AlterField(
                    model_name="statement",
                    name="tenant",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+", to="accounts.tenant"),
                ),
                migrations.AlterField(
                    model_name="statementline",
                    name="source_tenant",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+", to="accounts.tenant"),
                ),
                migrations.AlterField(
                    model_name="usageday",
                    name="tenant",
                    field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name="+", to="accounts.tenant"),
                ),
                migrations.AlterField(
                    model_name="usagerecord",
                    name="tenant",
                    field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name="+", to="accounts.tenant"),
                ),
            ],
            database_operations=[],
        ),
    ]
