"""Metering from the simulator through `usage_since`: splits, fractions, idempotence, closed periods."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import Sum

from apps.backends.models import SimAllocation
from apps.chargeback import services as chargeback
from apps.chargeback.fractions import exact_seconds, hami_share, mig_share, replica_share, worker_share
from apps.chargeback.metering import meter_cluster
from apps.chargeback.models import MeterWatermark, Period, UsageDay, UsageRecord
from apps.chargeback.periods import month_start
from apps.core.errors import Conflict
from tests.chargeback.conftest import advance, before_month_end, run, set_sim_time
from tests.chargeback.test_statements import rollup_matches_records


def truth_gpu_seconds(cluster) -> Fraction:
    """What the simulator's own allocation history says was used (exact)."""
    total = Fraction(0)
    for row in SimAllocation.objects.filter(sim__cluster=cluster, ended_at__isnull=False):
        total += exact_seconds(row.ended_at - row.started_at) * Fraction(row.gpu_fraction).limit_denominator(10**6)
    return total


def test_a_run_across_the_month_boundary_is_split_there(fleet, personas, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    set_sim_time(cluster, before_month_end(30))
    workload = run(personas.tenant_admin_a, django_capture_on_commit_callbacks, max_runtime_s=3600)
    assert workload.state == "running"
    advance(cluster, 2 * 3600)
    assert meter_cluster(cluster.pk).ok
    records = list(UsageRecord.objects.filter(workload=workload).order_by("start"))
    assert len(records) == 2
    first, second = records
    assert first.end == second.start == month_start(second.start) and first.period != second.period
    assert first.period.end == second.period.start == first.end
    assert sum(r.seconds for r in records) == Decimal(3600)
    metered = sum(Fraction(r.gpu_seconds) for r in records)
    assert metered == truth_gpu_seconds(cluster)
    assert all(r.tenant == personas.a_team and r.queue == fleet["queues"]["a-team"] for r in records)
    assert all(
        r.gpu_model.code == "h100" and r.gpus == Decimal(8) and r.rate_card.rate == Decimal("2.5") for r in records
    )


def test_metering_twice_never_double_counts(fleet, personas, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    run(personas.tenant_admin_a, django_capture_on_commit_callbacks, name="one", max_runtime_s=1800)
    advance(cluster, 600)
    first = meter_cluster(cluster.pk)
    again = meter_cluster(cluster.pk)  # nothing new beyond what real time added
    advance(cluster, 3600)
    third = meter_cluster(cluster.pk)
    assert first.inserted >= 1 and third.inserted >= 1 and again.ok and third.ok
    total = UsageRecord.objects.aggregate(s=Sum("gpu_seconds"))["s"]
    assert Fraction(total) == truth_gpu_seconds(cluster)
    # A replay of an interval already metered (the watermark rolled back by hand) adds nothing.
    MeterWatermark.objects.filter(cluster=cluster).update(metered_until=cluster.created_at)
    replay = meter_cluster(cluster.pk)
    assert replay.ok and replay.inserted == 0
    assert UsageRecord.objects.aggregate(s=Sum("gpu_seconds"))["s"] == total
    assert UsageDay.objects.aggregate(s=Sum("gpu_seconds"))["s"] == total and rollup_matches_records()


def test_mig_slices_are_priced_as_their_share(fleet, personas, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    workload = run(
        personas.tenant_admin_a,
        django_capture_on_commit_callbacks,
        name="mig",
        gpu_model="a100",
        workers=3,
        gpus_per_worker=1,
        sharing={"mode": "mig", "mig_profile": "1g.10gb"},
        max_runtime_s=900,
    )
    assert workload.state == "running", workload.state_reason
    advance(cluster, 1800)
    meter_cluster(cluster.pk)
    records = list(UsageRecord.objects.filter(workload=workload))
    assert records and all(r.gpus == Decimal("0.428571429") for r in records)  # exactly 3/7, to 9 places
    assert sum(Fraction(r.gpu_seconds) for r in records) == pytest.approx(float(truth_gpu_seconds(cluster)), abs=1e-5)


def test_fraction_rules():
    from apps.backends.catalog import catalog_by_code

    a100 = catalog_by_code()["a100"]
    assert mig_share(a100["mig_profiles"], "1g.10gb") == Fraction(1, 7)
    assert mig_share(a100["mig_profiles"], "3g.40gb") == Fraction(3, 7)
    assert mig_share(a100["mig_profiles"], "7g.80gb") == 1
    # HAMi: the larger of memory share and core share (OpenCost bills gpucores 25 as a whole GPU).
    assert hami_share(81920, 20480, 10) == Fraction(1, 4)
    assert hami_share(81920, 8192, 30) == Fraction(3, 10)
    assert replica_share(4) == Fraction(1, 4)

    class Model:
        memory_mib = 81920
        mig_profiles = a100["mig_profiles"]

    assert worker_share({"mode": "hami", "gpumem_mib": 40960, "gpucores": 25}, 1, Model) == Fraction(1, 2)
    assert worker_share({"mode": "time-slice", "replicas": 3}, 1, Model) == Fraction(1, 3)
    assert worker_share({"mode": "mps", "replicas": 3}, 1, Model) == Fraction(1, 3)  # one notion of a replica
    assert worker_share({"mode": "whole"}, 4, Model) == 4


def test_time_slice_mps_and_hami_workloads_meter_their_fraction(fleet, personas, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    sliced = run(
        personas.tenant_admin_a,
        django_capture_on_commit_callbacks,
        name="sliced",
        workers=2,
        gpus_per_worker=1,
        sharing={"mode": "time-slice", "replicas": 4},
    )
    mps = run(
        personas.tenant_admin_a,
        django_capture_on_commit_callbacks,
        name="mps-eval",
        workers=3,
        gpus_per_worker=1,
        sharing={"mode": "mps", "replicas": 4},
    )
    hami = run(
        personas.tenant_admin_a,
        django_capture_on_commit_callbacks,
        name="vgpu",
        workers=1,
        gpus_per_worker=1,
        sharing={"mode": "hami", "gpumem_mib": 20480, "gpucores": 30},
    )
    advance(cluster, 600)
    meter_cluster(cluster.pk)
    assert {r.gpus for r in UsageRecord.objects.filter(workload=sliced)} == {Decimal("0.5")}
    assert {r.gpus for r in UsageRecord.objects.filter(workload=mps)} == {Decimal("0.75")}
    assert {r.gpus for r in UsageRecord.objects.filter(workload=hami)} == {
        Decimal("0.3")
    }  # cores 30 % > memory 20480 / 81559 MiB


def test_a_closed_period_cannot_change(fleet, personas, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    set_sim_time(cluster, before_month_end(60))
    run(personas.tenant_admin_a, django_capture_on_commit_callbacks, max_runtime_s=1800)
    advance(cluster, 3 * 3600)
    meter_cluster(cluster.pk)
    record = UsageRecord.objects.order_by("start").first()
    period = record.period
    chargeback.close_period(fleet["admin"], period)
    # The service refuses rates inside it, and credits for it ...
    with pytest.raises(Conflict):
        chargeback.set_rate(fleet["admin"], gpu_model=fleet["models"]["h100"], rate="9", effective_from=record.start)
    # ... and the database refuses any change to its records, whoever tries.
    for statement in (
        "UPDATE chargeback_usagerecord SET gpu_seconds = 0 WHERE id = %s",
        "DELETE FROM chargeback_usagerecord WHERE id = %s",
    ):
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, [record.pk])
    with pytest.raises(IntegrityError), transaction.atomic():
        UsageRecord.objects.create(
            **{
                f.attname: getattr(record, f.attname)
                for f in UsageRecord._meta.concrete_fields
                if f.name not in {"id", "backend_id"}
            },
            backend_id="late",
        )
    record.refresh_from_db()
    assert record.gpu_seconds > 0 and Period.objects.get(pk=period.pk).is_closed


def test_idle_minutes_from_the_health_apps_dcgm_rollups(fleet, monkeypatch):
    from datetime import timedelta

    from apps.backends.types import Placement
    from apps.chargeback.utilization import health_rollups
    from apps.chargeback.waste import assess_waste
    from apps.fleet.models import Gpu
    from apps.health.models import NodeRollup

    cluster = fleet["cluster"]
    gpu = Gpu.objects.filter(node__cluster=cluster).select_related("node").first()
    start = before_month_end(600).replace(second=0, microsecond=0)
    for minute, util in enumerate((2.0, 50.0, 3.5)):
        NodeRollup.objects.create(
            node=gpu.node,
            minute=start + timedelta(minutes=minute),
            data={str(gpu.index): {"DCGM_FI_DEV_GPU_UTIL": [0, util, util]}},
        )
    spans = health_rollups(cluster, [gpu.uuid], start, start + timedelta(minutes=3))
    assert [s.utilization_pct for s in spans[gpu.uuid]] == [2.0, 50.0, 3.5]
    record = UsageRecord(start=start, end=start + timedelta(minutes=3), gpus=Decimal(1), gpu_seconds=Decimal(180))
    record._placements = [Placement(node=gpu.node.name, gpu_indexes=[gpu.index])]
    from apps.backends.registry import backend_class

    # Read the health app's rollups, as a Kubernetes or Slurm cluster does (a backend without its own telemetry).
    monkeypatch.setattr(backend_class(cluster.kind), "telemetry_in_process", False)
    assess_waste(cluster, [record])
    assert record.idle_gpu_seconds == Decimal(120) and record.used_gpu_seconds == Decimal("33.300000")


def test_per_pod_usage_of_one_gang_becomes_one_record(fleet):
    """Kubernetes reports usage per pod: pods that ran together add up; one that ended early stays apart."""
    from datetime import timedelta

    from apps.backends.types import UsageRecord as BackendUsage
    from apps.chargeback.metering import build_records

    start = before_month_end(600)
    end = start + timedelta(hours=1)
    pods = [
        BackendUsage("train-job", "a", "train", "NVIDIA-H100-80GB-HBM3", 8, start, end),
        BackendUsage("train-job", "a", "train", "NVIDIA-H100-80GB-HBM3", 8, start, end),
        BackendUsage("train-job", "a", "train", "NVIDIA-H100-80GB-HBM3", 8, start, end - timedelta(minutes=20)),
    ]
    rows = build_records(fleet["cluster"], pods, start)
    UsageRecord.objects.bulk_create(rows)
    assert sorted((r.gpus, r.end - r.start) for r in rows) == [
        (Decimal(8), timedelta(minutes=40)),
        (Decimal(16), timedelta(hours=1)),
    ]
    assert {r.gpu_model.code for r in rows} == {"h100"} and {r.tenant.slug for r in rows} == {"a"}
