# A simulated run has a runtime limit (the spec's max_runtime_s) and ends timed-out when its work would go past
# it (issue 19). Runs from before had none.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('backends', '0002_kube_cancellation'),
    ]

    operations = [
        migrations.AddField(
            model_name='simworkload',
            name='max_runtime_s',
            field=models.PositiveIntegerField(blank=True, help_text='the runtime limit: a run still going then is stopped (timed out)', null=True),
        ),
        migrations.AlterField(
            model_name='simworkload',
            name='state',
            field=models.CharField(choices=[('pending', 'pending'), ('running', 'running'), ('succeeded', 'succeeded'), ('failed', 'failed'), ('cancelled', 'cancelled'), ('preempted', 'preempted'), ('timed-out', 'timed-out'), ('unknown', 'unknown')], max_length=20),
        ),
    ]
