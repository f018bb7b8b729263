"""Admission holds: the pause on a tenant's preemptible work that chargeback keeps (a spent spend budget)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_tenant'),
        ('tenancy', '0006_tenant_moved_to_accounts'),
    ]

    operations = [
        migrations.CreateModel(
            name='AdmissionHold',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('since', models.DateTimeField()),
                ('amount', models.DecimalField(decimal_places=2, max_digits=16)),
                ('currency', models.CharField(max_length=3)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('tenant', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='admission_hold', to='accounts.tenant')),
            ],
        ),
    ]
