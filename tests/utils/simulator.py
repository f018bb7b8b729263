"""Taking the simulator's seeded outcome draws out of a test.

The simulator fails 5 % of runs part-way, and under a runtime limit draws how long the work takes (within the
limit, or past it for the 3 % it stops: timed out), all from the seed and the backend name; the name holds the
workload's database id, so the draws change between runs of the suite. A test that watches a run finish takes
them out. The run's end was fixed when it started, so its end moves too.
"""

from __future__ import annotations

from datetime import timedelta


def full_runs(monkeypatch) -> None:
    """Every simulated run started from now on lasts exactly its runtime limit and completes, whatever its name
    draws: for a run that may not exist yet when the test could call `runs_to_the_end` (a submission the outbox
    sends later, in another thread)."""
    from apps.backends.simulator import engine
    from apps.backends.simulator.specs import RunPlan

    monkeypatch.setattr(engine, "run_plan", lambda seed, spec: RunPlan(spec.max_runtime_s, None, spec.max_runtime_s))


def runs_to_the_end(*workloads) -> None:
    """Every given console workload's simulated run (or, with none given, every simulated run) finishes its course:
    it does not fail, and under a runtime limit its work takes the whole limit (and completes), so its length is
    the spec's max runtime, as a test computing the run's GPU-hours expects."""
    from apps.backends.models import SimWorkload

    runs = SimWorkload.objects.all()
    if workloads:
        runs = runs.filter(name__in=[w.backend_name for w in workloads])
    for sim in runs.filter(state__in=["pending", "running"]):
        duration = sim.max_runtime_s or sim.duration_s
        ends_at = sim.started_at + timedelta(seconds=duration) if sim.started_at else None
        SimWorkload.objects.filter(pk=sim.pk).update(fail_after_s=None, duration_s=duration, ends_at=ends_at)


def overruns(workload) -> None:
    """The console workload's simulated run needs longer than its max runtime: the limit stops it (timed out)."""
    from apps.backends.models import SimWorkload

    sim = SimWorkload.objects.get(name=workload.backend_name)
    assert sim.max_runtime_s, "only a run under a runtime limit can overrun it"
    ends_at = sim.started_at + timedelta(seconds=sim.max_runtime_s) if sim.started_at else None
    SimWorkload.objects.filter(pk=sim.pk).update(fail_after_s=None, duration_s=2 * sim.max_runtime_s, ends_at=ends_at)
