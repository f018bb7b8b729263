# The tenant tree moved from apps.tenancy to apps.accounts (below everything scoped by tenant).
# Written by hand: the table keeps its name (tenancy_tenant) and its rows, so only Django's state
# moves. apps.tenancy's 0006 drops the old model from its state once every foreign key points here.

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


def content_type_to(app_label):
    """Move the tenant's content type row, so admin log entries and permissions follow the model."""

    def move(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        db = schema_editor.connection.alias
        types = ContentType.objects.using(db).filter(model="tenant")
        # A fresh database has neither row yet (post_migrate creates them); never make a duplicate.
        if not types.filter(app_label=app_label).exists():
            types.exclude(app_label=app_label).filter(app_label__in=["tenancy", "accounts"]).update(
                app_label=app_label
            )

    return move


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Tenant",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(max_length=100, validators=[django.core.validators.MaxLengthValidator(100)])),
                        ("slug", models.CharField(max_length=63, unique=True, validators=[django.core.validators.RegexValidator(code="dns1123_label", message="Use lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label, at most 63 characters).", regex="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")])),
                        ("path", models.CharField(db_index=True, default="", editable=False, max_length=1000)),
                        ("description", models.TextField(blank=True, max_length=2000)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("parent", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name="children", to="accounts.tenant")),
                    ],
                    options={
                        "db_table": "tenancy_tenant",
                        "ordering": ["path"],
                        "constraints": [models.CheckConstraint(condition=models.Q(("parent", models.F("id")), _negated=True), name="tenant_not_own_parent", violation_error_message="A tenant cannot be its own parent.")],
                    },
                ),
                # Same table, same columns, same constraints: only the model the state points at changes.
                migrations.AlterField(
                    model_name="apitoken",
                    name="tenant",
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, to="accounts.tenant"),
                ),
                migrations.AlterField(
                    model_name="membership",
                    name="tenant",
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name="memberships", to="accounts.tenant"),
                ),
                migrations.AlterField(
                    model_name="user",
                    name="owner_tenant",
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name="service_accounts", to="accounts.tenant"),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_type_to("accounts"), content_type_to("tenancy")),
    ]
