"""Hung training jobs (issue 24): simulated runs that hang or idle, judged minute by minute from the rollups.

Each step is one simulated minute: the simulator's clock moves 60 s, one ingestion cycle reads its exporters at
the step's time (so the minute turns and a rollup is written), then the minute's hung-job check runs.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.backends.models import SimWorkload
from apps.backends.registry import get_backend
from apps.health.hung import check_cluster, run_dump_command
from apps.health.ingest import run_cycle
from apps.health.models import Incident, NodeRollup
from apps.health.services import rulesets
from apps.health.services.rulesets import tune_rule
from apps.workloads.models import OutboxEntry, Workload
from apps.workloads.services import reconcile_workloads, submit_workload
from tests.health.conftest import training_spec
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db


def start(personas, capture, name: str, **spec) -> Workload:
    with capture(execute=True):
        workload, _ = submit_workload(fresh(personas.member_a), kind="training", spec=training_spec(name=name, **spec))
    reconcile_workloads()
    workload.refresh_from_db()
    assert workload.state == "running", workload.state_reason
    return workload


def behaves(workload: Workload, **columns) -> None:
    """What the labels sim/hang-after-s and sim/idle-phase-s set at submission, for a run already started."""
    SimWorkload.objects.filter(name=workload.backend_name).update(**columns)


class Clock:
    """Simulated minutes: the simulator and the health cycle move together, one minute a step."""

    def __init__(self, cluster):
        self.cluster, self.backend = cluster, get_backend(cluster)
        self.at = timezone.now()
        run_cycle(cluster.pk, at=self.at)

    def step(self, minutes: int = 1):
        for _ in range(minutes):
            self.backend.advance(60)
            self.at += timedelta(minutes=1)
            run_cycle(self.cluster.pk, at=self.at)
            result = check_cluster(self.cluster.pk, at=self.at)
        return result


def incident_of(workload: Workload) -> Incident | None:
    return Incident.objects.filter(cause=f"hung-job-{workload.pk}").first()


def test_a_hang_is_found_after_the_window_an_idle_phase_never_a_gap_is_not_judged(
    fleet, personas, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    hangs = start(personas, capture, "hangs", env={"SIM_HANG_AFTER_S": "120"})  # the label sim/hang-after-s
    loads = start(personas, capture, "loads-data")
    gappy = start(personas, capture, "gappy")
    assert SimWorkload.objects.get(name=hangs.backend_name).hang_after_s == 120  # stuck from its third minute on
    behaves(loads, idle_phase_s=300)  # five idle minutes of data loading, then busy: shorter than the window
    behaves(gappy, hang_after_s=0)  # quiet from the start, but one minute of its node's rollups goes missing
    clock = Clock(fleet["cluster"])
    clock.step(5)
    gappy_node = gappy.placements[0]["node"]
    assert NodeRollup.objects.filter(node__name=gappy_node).order_by("-minute").first().delete()[0] == 1  # minute 4
    clock.step(6)  # 11 minutes: the hang began at 2, so its window of 10 is not over
    assert incident_of(hangs) is None and incident_of(gappy) is None
    clock.step(1)
    incident = incident_of(hangs)
    assert incident is not None, "found within window + 2 minutes of the hang"
    assert incident.node.name == hangs.placements[0]["node"] and incident.rule_key == "hung-job"
    assert (
        incident.title
        == f"Hung training job (its GPUs idle, or its heartbeat stopped): a/hangs on {incident.node.name}"
    )
    summary = incident.evidence[0]["text"]
    assert "a/hangs" in summary and "submitted by member-a" in summary and "tenant a" in summary
    per_gpu = incident.evidence[1:]
    assert len(per_gpu) == 8 and all("PCIe + NVLink traffic" in e["text"] for e in per_gpu)
    assert list(incident.workloads.all()) == [hangs] and list(incident.tenants.values_list("slug", flat=True)) == ["a"]
    assert not incident.node.unschedulable and incident.state == "detected"
    assert AuditEvent.objects.filter(action="incident.open", target_id=str(incident.pk)).count() == 1
    clock.step(2)
    assert incident_of(loads) is None  # its idle phase was shorter than the window: never flagged
    assert incident_of(gappy) is None  # minute 4 is still inside its window (without the gap: found at 11)
    assert Incident.objects.filter(cause=f"hung-job-{hangs.pk}").count() == 1  # seen again, not opened again
    clock.step(1)
    assert incident_of(gappy) is not None  # the gap has left the window
    assert incident_of(loads) is None


@pytest.mark.parametrize("then", ["requeue", "cancel"])
def test_requeue_or_cancel_happen_once(then, fleet, personas, django_capture_on_commit_callbacks):
    admin = fresh(personas.platform_admin)
    params = {"window_minutes": 2, "util_below": 5, "traffic_below_mbps": 10, "then": then, "dump": True}
    tune_rule(admin, "hung-job", params=params, reason="test")
    rulesets._compiled.clear()  # compiled once per version and process: another test's version 2 may be cached
    job = start(personas, django_capture_on_commit_callbacks, "stuck")
    behaves(job, hang_after_s=0)
    clock = Clock(fleet["cluster"])
    with django_capture_on_commit_callbacks(execute=False):
        clock.step(3)
        incident = incident_of(job)
        assert incident is not None
        clock.step(2)  # the following minutes act no more
        check_cluster(fleet["cluster"].pk, at=clock.at)
    job.refresh_from_db()
    actions = AuditEvent.objects.filter(action=f"workload.{then}", target_id=str(job.pk))
    assert actions.count() == 1 and actions.get().actor is None
    assert incident.events.filter(kind=f"hung-job.{then}").count() == 1
    dumps = incident.events.filter(kind="hung-job.dump")
    assert dumps.count() == 1 and "all_reduce" in dumps.get().message and "ncclProxyProgress" in dumps.get().message
    stops = OutboxEntry.objects.filter(workload=job, action="cancel")
    assert stops.count() == 1 and stops.get().run == 0  # the hung run is stopped, whatever comes next
    if then == "requeue":
        assert job.state == "pending" and job.requeues == 1 and job.backend_name.startswith(f"wl{job.pk}r1-")
    else:
        assert job.state == "cancelling"


def test_a_silent_heartbeat_is_a_hang_even_on_busy_gpus(fleet, personas, django_capture_on_commit_callbacks):
    from apps.workloads.services import record_heartbeat

    capture = django_capture_on_commit_callbacks
    beating = start(personas, capture, "beating", progress_timeout_minutes=2)
    silent = start(personas, capture, "silent", progress_timeout_minutes=2)
    clock = Clock(fleet["cluster"])
    for _ in range(3):
        record_heartbeat(fresh(personas.member_a), beating)
        Workload.objects.filter(pk=beating.pk).update(last_heartbeat_at=clock.at)
        clock.step()
    assert incident_of(beating) is None
    incident = incident_of(silent)
    assert incident is not None and "sent no heartbeat in this run" in incident.evidence[0]["text"]
    assert incident.evidence[0]["metric"] == "last_heartbeat_at"


def test_the_dump_command_runs_without_a_shell():
    values = {"namespace": "a", "pod": "wl1-x-0", "node": "gpu-0001", "job": "wl1-x"}
    assert (
        run_dump_command("echo {namespace} {pod} {node} {job} ';' $HOME", values) == "a wl1-x-0 gpu-0001 wl1-x ; $HOME"
    )
    assert "could not run" in run_dump_command("/nonexistent/py-spy dump", values)
