"""Taking the simulator's seeded failure draw out of a test.

The simulator fails 5 % of runs part-way, drawn from the seed and the backend name; the name holds the workload's
database id, so the draw changes between runs of the suite. A test that watches a run finish takes it out. The run's
end was fixed when it started (at the failure point), so clearing `fail_after_s` alone would end it early as
"succeeded": its end moves to the full duration too.
"""

from __future__ import annotations

from datetime import timedelta


def runs_to_the_end(*workloads) -> None:
    """Every given console workload's simulated run (or, with none given, every simulated run) finishes its course."""
    from apps.backends.models import SimWorkload

    runs = SimWorkload.objects.filter(fail_after_s__isnull=False)
    if workloads:
        runs = runs.filter(name__in=[w.backend_name for w in workloads])
    for sim in runs:
        ends_at = sim.started_at + timedelta(seconds=sim.duration_s) if sim.started_at else None
        SimWorkload.objects.filter(pk=sim.pk).update(fail_after_s=None, ends_at=ends_at)
