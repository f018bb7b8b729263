"""Seed the GPU model catalog (apps/backends/catalog.py); platform admins may add models later."""

from django.db import migrations


def seed(apps, schema_editor):
    from apps.backends.catalog import CATALOG

    GpuModel = apps.get_model("fleet", "GpuModel")
    for entry in CATALOG:
        values = {key: value for key, value in entry.items() if key not in {"name"}}
        values["mig_profiles"] = [list(p) for p in entry["mig_profiles"]]
        GpuModel.objects.update_or_create(name=entry["name"], defaults=values)


class Migration(migrations.Migration):
    dependencies = [("fleet", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
