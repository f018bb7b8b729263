"""Seed the priority tiers (platform admins may edit them)."""

from django.db import migrations

TIERS = [
    ("online-inference", 1000, False, False, "Serving: never preempted, never borrows."),
    ("periodic", 800, True, True, "Scheduled pipelines: preempted only to give a guarantee back."),
    ("training", 500, True, True, "Training jobs."),
    ("exploratory", 100, True, True, "Notebooks and experiments: preempted first."),
]


def seed(apps, schema_editor):
    PriorityTier = apps.get_model("tenancy", "PriorityTier")
    for name, value, preemptible, may_borrow, description in TIERS:
        PriorityTier.objects.update_or_create(name=name, defaults={
            "value": value, "preemptible": preemptible, "may_borrow": may_borrow, "description": description})


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0002_queues_quotas")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
