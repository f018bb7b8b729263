"""The fast bulk update writes exactly what Django's would, JSON and NULLs included."""

from django.utils import timezone

from apps.core.bulk import bulk_update_fast
from apps.fleet.models import GpuModel
from apps.tenancy.models import Admission, PriorityTier, Queue


def test_bulk_update_fast_round_trip(personas):
    queue = Queue.objects.create(tenant=personas.a, name="q")
    h100, tier = GpuModel.objects.get(code="h100"), PriorityTier.objects.get(name="training")
    rows = [
        Admission.objects.create(
            name=f"j{i}", queue=queue, gpu_model=h100, gpus=1, tier=tier, submitted_at=timezone.now()
        )
        for i in range(3)
    ]
    now = timezone.now()
    rows[0].state, rows[0].borrowed_from, rows[0].admitted_at = "admitted", {"7": 2}, now
    rows[1].reason, rows[1].reclaim_plan = 'quote " and \\ backslash', [[1, 8]]
    assert (
        bulk_update_fast(Admission, rows[:2], ["state", "reason", "borrowed_from", "reclaim_plan", "admitted_at"]) == 2
    )
    fresh = {a.name: a for a in Admission.objects.all()}
    assert fresh["j0"].state == "admitted" and fresh["j0"].borrowed_from == {"7": 2} and fresh["j0"].admitted_at == now
    assert fresh["j1"].reason == 'quote " and \\ backslash' and fresh["j1"].reclaim_plan == [[1, 8]]
    assert fresh["j1"].admitted_at is None and fresh["j2"].state == "pending"
    assert bulk_update_fast(Admission, [], ["state"]) == 0


def test_bulk_update_fast_splits_what_one_statement_cannot_carry(personas):
    """PostgreSQL takes at most 65,535 parameters per statement: 6,000 rows of 11 fields is 72,000 of them (an
    admission pass over 10,000 pending claims writes that many)."""
    queue = Queue.objects.create(tenant=personas.a, name="q")
    h100, tier = GpuModel.objects.get(code="h100"), PriorityTier.objects.get(name="training")
    now = timezone.now()
    Admission.objects.bulk_create(
        [Admission(name=f"j{i}", queue=queue, gpu_model=h100, gpus=1, tier=tier, submitted_at=now) for i in range(6000)]
    )
    rows = list(Admission.objects.all())
    fields = ["state", "decision", "reason", "borrowed_from", "reclaim_plan", "admitted_at", "ends_at"]
    fields += ["reserved_units", "expected_start", "holds_cluster", "max_runtime_s"]
    for row in rows:
        row.reason, row.reserved_units = f"why {row.pk}", row.pk
    assert bulk_update_fast(Admission, rows, fields) == 6000
    assert Admission.objects.filter(reason__startswith="why ").count() == 6000
    assert all(a.reason == f"why {a.pk}" and a.reserved_units == a.pk for a in Admission.objects.all())
