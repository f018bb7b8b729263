"""Notification channels and notifications move to the notifications app (apps/notifications), which sits
below health so that inference and chargeback can send through it too. The tables stay where they are
(`health_notificationchannel`, `health_notification`, with their rows): only Django's idea of which app
owns them changes, here and in notifications' 0001. A notification keeps its incident's id but no longer a
foreign key to it (that would point from the lower app up to health): the constraint goes, the column and
its index stay, and health deletes an incident's notifications with the incident itself.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("health", "0003_tenant_in_accounts"),
    ]

    operations = [
        migrations.AlterField(
            model_name="notification",
            name="incident",
            field=models.ForeignKey(
                blank=True,
                null=True,
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="health.incident",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="Notification"),
                migrations.DeleteModel(name="NotificationChannel"),
            ],
            database_operations=[],
        ),
    ]
