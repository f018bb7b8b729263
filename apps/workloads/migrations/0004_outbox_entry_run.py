# Each outbox entry names the run it acts on: reconcile asks the backend about a requeued workload's new run
# only once that run's own submit entry is done (issue 19). Entries written before are first runs (0), except a
# requeued workload's submit entries written after its latest requeue: those are its current run's.

from django.db import migrations, models
from django.db.models import Max


def number_current_runs(apps, schema_editor):
    Workload = apps.get_model("workloads", "Workload")
    OutboxEntry = apps.get_model("workloads", "OutboxEntry")
    requeued = Workload.objects.filter(requeues__gt=0).annotate(
        last_requeue=Max("events__time", filter=models.Q(events__kind="requeue"))
    )
    for workload in requeued.values("id", "requeues", "last_requeue"):
        if workload["last_requeue"] is not None:
            OutboxEntry.objects.filter(
                workload_id=workload["id"], created_at__gte=workload["last_requeue"]
            ).update(run=workload["requeues"])


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
        migrations.RunPython(number_current_runs, migrations.RunPython.noop),
    ]
