# Issue 19: a claim counts its GPU share exactly and knows where it runs, when it ends and what it reserves.
#
# `gpus` (whole GPUs: a 1/7 MIG slice took a whole GPU of quota) becomes `gpu_units`, the share in units of
# 1/SHARE_UNITS GPU (apps/backends/shares.py); the amounts in `borrowed_from` and `reclaim_plan` are converted
# to the same units. `cluster` is taken from the claim's workload where it has one; `max_runtime_s` and
# `ends_at` from its spec (training: max_runtime_s; a service without one runs until cancelled). The two
# covering indexes are rebuilt over the new column.

import django.db.models.deletion
from django.db import migrations, models

SHARE_UNITS = 2**10 * 3**2 * 5**2 * 7 * 11 * 13  # apps/backends/shares.py, as of this migration


def forwards(apps, schema_editor):
    from datetime import timedelta

    Admission = apps.get_model("tenancy", "Admission")
    Workload = apps.get_model("workloads", "Workload")
    placed = {
        pk: (cluster, spec)
        for pk, cluster, spec in Workload.objects.filter(admission__isnull=False).values_list(
            "admission_id", "cluster_id", "spec"
        )
    }
    rows = []
    for claim in Admission.objects.all().iterator(chunk_size=2000):
        claim.gpu_units = claim.gpus * SHARE_UNITS
        claim.borrowed_from = {k: int(v) * SHARE_UNITS for k, v in (claim.borrowed_from or {}).items()}
        claim.reclaim_plan = [[int(h), int(n) * SHARE_UNITS] for h, n in (claim.reclaim_plan or [])]
        cluster, spec = placed.get(claim.pk, (None, {}))
        claim.cluster_id = cluster
        runtime = (spec or {}).get("max_runtime_s")
        claim.max_runtime_s = runtime if isinstance(runtime, int) and runtime > 0 else None
        if claim.max_runtime_s and claim.admitted_at:
            claim.ends_at = claim.admitted_at + timedelta(seconds=claim.max_runtime_s)
        rows.append(claim)
        if len(rows) >= 2000:
            Admission.objects.bulk_update(
                rows, ["gpu_units", "borrowed_from", "reclaim_plan", "cluster", "max_runtime_s", "ends_at"]
            )
            rows = []
    Admission.objects.bulk_update(
        rows, ["gpu_units", "borrowed_from", "reclaim_plan", "cluster", "max_runtime_s", "ends_at"]
    )


def backwards(apps, schema_editor):
    Admission = apps.get_model("tenancy", "Admission")
    rows = []
    for claim in Admission.objects.all().iterator(chunk_size=2000):
        claim.gpus = max(-(-claim.gpu_units // SHARE_UNITS), 1)  # whole GPUs, rounded up, as before
        claim.borrowed_from = {
            k: -(-int(v) // SHARE_UNITS) for k, v in (claim.borrowed_from or {}).items() if int(k) >= 0
        }
        claim.reclaim_plan = [[int(h), -(-int(n) // SHARE_UNITS)] for h, n in (claim.reclaim_plan or [])]
        rows.append(claim)
    Admission.objects.bulk_update(rows, ["gpus", "borrowed_from", "reclaim_plan"], batch_size=2000)


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0002_gpu_catalog"),
        ("tenancy", "0008_guarantee_cap"),
        ("workloads", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="admission",
            name="gpu_units",
            field=models.BigIntegerField(default=0, help_text="the GPU share, in units of 1/SHARE_UNITS of a GPU"),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="admission",
            name="cluster",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="fleet.cluster",
            ),
        ),
        migrations.AddField(
            model_name="admission",
            name="max_runtime_s",
            field=models.PositiveIntegerField(blank=True, help_text="the workload's runtime limit", null=True),
        ),
        migrations.AddField(
            model_name="admission",
            name="ends_at",
            field=models.DateTimeField(blank=True, help_text="admitted_at + max_runtime_s", null=True),
        ),
        migrations.AddField(
            model_name="admission",
            name="reserved_units",
            field=models.BigIntegerField(default=0, help_text="held for this pending head of its queue"),
        ),
        migrations.AddField(
            model_name="admission",
            name="expected_start",
            field=models.DateTimeField(blank=True, help_text="when its reservation is expected to start", null=True),
        ),
        migrations.AddField(
            model_name="admission",
            name="holds_cluster",
            field=models.BooleanField(default=False, help_text="its reservation holds its cluster's GPUs too"),
        ),
        migrations.RunPython(forwards, backwards),
        migrations.RemoveIndex(model_name="admission", name="admission_state_model"),
        migrations.RemoveIndex(model_name="admission", name="admission_queue_use"),
        migrations.RemoveField(model_name="admission", name="gpus"),
        migrations.AddIndex(
            model_name="admission",
            index=models.Index(
                fields=["state", "gpu_model"], include=("queue", "gpu_units"), name="admission_state_model_units"
            ),
        ),
        migrations.AddIndex(
            model_name="admission",
            index=models.Index(
                fields=["queue", "gpu_model", "state"], include=("gpu_units",), name="admission_queue_use_units"
            ),
        ),
        migrations.AddIndex(
            model_name="admission",
            index=models.Index(
                condition=models.Q(("state", "pending"), ("expected_start__isnull", False)),
                fields=["gpu_model", "cluster"],
                name="admission_reserved",
            ),
        ),
    ]
