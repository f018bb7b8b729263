# Each outbox entry names the run it acts on: reconcile asks the backend about a requeued workload's new run
# only once that run's own submit entry is done (issue 19). Existing entries are first runs (0).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workloads', '0003_tenant_in_accounts'),
    ]

    operations = [
        migrations.AddField(
            model_name='outboxentry',
            name='run',
            field=models.PositiveIntegerField(default=0),
        ),
    ]
