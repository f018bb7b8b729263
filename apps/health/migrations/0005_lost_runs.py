"""Runs a fault cost their owners, as health records them for chargeback to credit (it pulls them)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0002_gpu_catalog'),
        ('health', '0004_notifications_move_out'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='LostRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('backend_id', models.CharField(help_text='the interrupted run as the backend names it', max_length=253)),
                ('interrupted_at', models.DateTimeField()),
                ('reason', models.CharField(max_length=500)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('taken_at', models.DateTimeField(blank=True, help_text='when chargeback took it into account', null=True)),
                ('outcome', models.CharField(blank=True, help_text='what chargeback made of it', max_length=300)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='fleet.cluster')),
                ('incident', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='lost_runs', to='health.incident')),
            ],
            options={
                'ordering': ['id'],
                'indexes': [models.Index(condition=models.Q(('taken_at__isnull', True)), fields=['id'], name='lostrun_not_taken')],
                'constraints': [models.UniqueConstraint(fields=('cluster', 'backend_id', 'interrupted_at'), name='lostrun_one_per_run')],
            },
        ),
    ]
