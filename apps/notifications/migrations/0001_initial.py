"""The notification tables, taken over from the health app as they are (health's 0003 lets go of them).

State only: the tables, their rows and their indexes exist already (health's 0001 made them), under the
same names, which `db_table` keeps.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("accounts", "0002_tenant"),
        ("health", "0004_notifications_move_out"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="NotificationChannel",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        (
                            "kind",
                            models.CharField(
                                choices=[("webhook", "Webhook (Slack-compatible JSON)"), ("email", "E-mail")],
                                max_length=10,
                            ),
                        ),
                        ("target", models.CharField(help_text="webhook URL or e-mail address", max_length=500)),
                        ("enabled", models.BooleanField(default=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "tenant",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="accounts.tenant",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "health_notificationchannel",
                        "ordering": ["tenant__slug", "kind", "target"],
                    },
                ),
                migrations.CreateModel(
                    name="Notification",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("incident_id", models.BigIntegerField(blank=True, db_index=True, null=True)),
                        (
                            "kind",
                            models.CharField(
                                choices=[("webhook", "Webhook (Slack-compatible JSON)"), ("email", "E-mail")],
                                max_length=10,
                            ),
                        ),
                        ("target", models.CharField(max_length=500)),
                        ("audience", models.CharField(help_text="on-call or owners", max_length=20)),
                        ("subject", models.CharField(max_length=300)),
                        ("text", models.TextField()),
                        (
                            "status",
                            models.CharField(
                                choices=[("pending", "Pending"), ("sent", "Sent"), ("failed", "Failed")],
                                default="pending",
                                max_length=10,
                            ),
                        ),
                        ("attempts", models.PositiveIntegerField(default=0)),
                        ("last_error", models.CharField(blank=True, max_length=500)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("sent_at", models.DateTimeField(blank=True, null=True)),
                    ],
                    options={
                        "db_table": "health_notification",
                        "ordering": ["-id"],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
