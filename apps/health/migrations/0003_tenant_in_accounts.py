# The tenant model moved to apps.accounts with its table (tenancy_tenant): the foreign key and the
# many-to-many table (health_incident_tenants, column tenant_id) keep their columns and constraints;
# only their target in Django's state changes.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0002_tenant"),
        ("health", "0002_seed_defaults"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="incident",
                    name="tenants",
                    field=models.ManyToManyField(blank=True, related_name="+", to="accounts.tenant"),
                ),
                migrations.AlterField(
                    model_name="notificationchannel",
                    name="tenant",
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="accounts.tenant"),
                ),
            ],
            database_operations=[],
        ),
    ]
