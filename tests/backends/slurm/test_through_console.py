"""Workloads submitted through the console (service -> outbox -> Slurm backend -> the workloads renderer's
sbatch script) on the real local cluster: they run, Slurm's refusals reach the workload page, Slurm's
pending reasons show in the console, and a controller outage loses and duplicates nothing.

Slurm runs the rendered training script for real (sbatch, srun on the allocated nodes, GRES); only
`torchrun` is a stand-in on the jobs' PATH that runs the command after its `--`, as torchrun --no-python
would (there is no PyTorch on this machine).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from django.db import connections
from django.urls import reverse
from django.utils import timezone

from apps.backends.registry import get_backend
from apps.core.errors import InvalidInput
from apps.fleet import services as fleet
from apps.fleet.models import GpuModel
from apps.tenancy import services as tenancy
from apps.tenancy.desired_state import build_desired_state
from apps.workloads import services
from apps.workloads.models import OutboxEntry, OutboxStatus, Workload
from tests.backends.slurm.conftest import connection, wait_for
from tests.utils.personas import fresh

TORCHRUN = '#!/bin/sh\nwhile [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n'
ACCOUNT = "a_train"


def spec(name: str, **overrides) -> dict:
    data = {
        "name": name,
        "tenant": "a",
        "queue": "train",
        "tier": "training",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["sleep"],
        "args": ["2"],
        "workers": 1,
        "gpus_per_worker": 2,
        "gpu_model": "a100",
        "max_runtime_s": 600,
    }
    data.update(overrides)
    return data


@pytest.fixture(autouse=True)
def _fresh_workload_ids(db):
    """Backend names are "wl<id>-<name>", unique per console database; the test database starts at id 1 on
    every run while the local cluster's accounting remembers earlier runs' jobs. Start ids past them."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('workloads_workload', 'id'), %s)", [time.time_ns() // 1000]
        )


@pytest.fixture
def slurm_fleet(personas, local_slurm, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "torchrun").write_text(TORCHRUN)
    (bin_dir / "torchrun").chmod(0o755)
    admin = fresh(personas.platform_admin)
    cluster = fleet.create_cluster(
        admin, name="gpuc", kind="slurm", connection=connection(local_slurm, job_path=f"{bin_dir}:/usr/bin:/bin")
    )
    assert fleet.sync_inventory(cluster.pk).ok
    a100 = GpuModel.objects.get(code="a100")
    tenancy.set_guarantee_cap(admin, tenant=personas.a, gpu_model=a100, guaranteed=32)
    train = tenancy.create_queue(admin, tenant=personas.a, name="train")
    tenancy.bind_queue(admin, train, cluster=cluster, slurm_account=ACCOUNT)
    tenancy.set_quota(admin, queue=train, gpu_model=a100, guaranteed=32)
    backend = get_backend(cluster)
    backend.quota_pusher().push(build_desired_state(cluster))
    yield {"cluster": cluster, "queue": train, "a100": a100, "admin": admin, "backend": backend}
    for workload in Workload.objects.exclude(backend_name=""):
        local_slurm.run("scancel", f"--name={workload.backend_name}", check=False)


def submit(personas, data, captured, key=None):
    with captured(execute=True):
        workload, _ = services.submit_workload(
            fresh(personas.member_a), kind="training", spec=data, idempotency_key=key
        )
    workload.refresh_from_db()
    return workload


def reconciled(workload_id: int, states: set[str]):
    def check():
        services.reconcile_workloads()
        workload = Workload.objects.get(pk=workload_id)
        return workload if workload.state in states else None

    return check


def test_two_gpu_job_submitted_through_the_console_runs_and_completes(
    slurm_fleet, personas, local_slurm, django_capture_on_commit_callbacks
):
    workload = submit(personas, spec("two-gpus"), django_capture_on_commit_callbacks, key="two")
    assert workload.state in {"admitted", "running"}, workload.state_reason
    event = workload.events.get(kind="backend")
    assert f"submitted to gpuc as {workload.backend_name}" in event.message and "Slurm job" in event.message

    running = wait_for(reconciled(workload.pk, {"running", "succeeded"}), "the job to run")
    if running.state == "running":
        assert len(running.placements) == 1 and len(running.placements[0]["gpus"]) == 2
    done = wait_for(reconciled(workload.pk, {"succeeded", "failed"}), "the job to finish")
    assert done.state == "succeeded", done.state_reason

    def accounted():
        out = local_slurm.run(
            "sacct", "-X", "-n", "-P", f"--name={workload.backend_name}", "-o", "Account,QOS,State,AllocTRES"
        ).stdout.strip()
        return out if "|COMPLETED|" in out else None

    row = wait_for(accounted, "sacct to record the finished job")
    account, qos, state, tres = row.split("|")
    assert (account, qos, state) == (ACCOUNT, "training", "COMPLETED") and "gres/gpu:a100=2" in tres


def test_an_impossible_job_fails_with_slurms_message_on_the_workload_page(
    slurm_fleet, personas, client, django_capture_on_commit_callbacks
):
    # 16 CPUs per task on 8-CPU nodes: the console cannot know, Slurm refuses it at submission.
    workload = submit(personas, spec("too-big", cpu=16), django_capture_on_commit_callbacks)
    assert workload.state == "failed"
    assert "Requested node configuration is not available" in workload.state_reason
    assert OutboxEntry.objects.get(workload=workload).status == OutboxStatus.FAILED
    client.force_login(fresh(personas.member_a))
    page = client.get(reverse("workloads:workload_detail", args=[workload.pk]))
    assert page.status_code == 200
    assert "Requested node configuration is not available" in page.content.decode()


def test_nine_gpus_per_worker_on_eight_gpu_nodes_are_refused_by_the_console_before_slurm(
    slurm_fleet, personas, local_slurm, django_capture_on_commit_callbacks
):
    """What the console knows from its inventory (8 GPUs per node here) it refuses itself, naming the field;
    nothing reaches Slurm (README, "Slurm clusters")."""
    with pytest.raises(InvalidInput) as caught, django_capture_on_commit_callbacks(execute=True):
        services.submit_workload(fresh(personas.member_a), kind="training", spec=spec("nine", gpus_per_worker=9))
    assert "gpus_per_worker" in caught.value.fields
    assert "9 GPUs exceed the 8 GPUs per node" in str(caught.value.fields["gpus_per_worker"])
    assert not Workload.objects.filter(name="nine").exists()
    assert local_slurm.run("squeue", "-h", "--states=all", "-o", "%j").stdout.count("-nine") == 0


@pytest.mark.parametrize(
    ("connection_change", "overrides", "field", "text"),
    [
        ({"containers": None}, {}, "image", 'containers: "pyxis"'),
        ({}, {"secret_env": [{"name": "HF_TOKEN", "secret": "hf", "key": "token"}]}, "secret_env", "secrets_dir"),
    ],
)
def test_what_this_slurm_cluster_cannot_run_is_refused_at_submission(
    slurm_fleet, personas, local_slurm, django_capture_on_commit_callbacks, connection_change, overrides, field, text
):
    """An image with no container runtime set, a secret with no secrets_dir: refused by the API naming the field
    and the setting, with nothing stored and nothing sent to Slurm (not accepted, then failed at the outbox)."""
    cluster = slurm_fleet["cluster"]
    settings = {**cluster.connection, **connection_change}
    cluster.connection = {k: v for k, v in settings.items() if v is not None}
    cluster.save(update_fields=["connection"])
    with pytest.raises(InvalidInput) as caught, django_capture_on_commit_callbacks(execute=True):
        services.submit_workload(fresh(personas.member_a), kind="training", spec=spec("cannot", **overrides))
    assert field in caught.value.fields and text in str(caught.value.fields[field])
    assert str(caught.value).startswith("Cluster gpuc cannot run this workload")
    assert not Workload.objects.filter(name="cannot").exists()
    assert local_slurm.run("squeue", "-h", "--states=all", "-o", "%j").stdout.count("-cannot") == 0


def test_a_job_beyond_the_pushed_grptres_waits_with_slurms_reason_in_the_console(
    slurm_fleet, personas, local_slurm, django_capture_on_commit_callbacks
):
    admin = slurm_fleet["admin"]
    tenancy.set_quota(admin, queue=slurm_fleet["queue"], gpu_model=slurm_fleet["a100"], guaranteed=4, borrow_limit=0)
    result = slurm_fleet["backend"].quota_pusher().push(build_desired_state(slurm_fleet["cluster"]))
    assert any("grptres" in m and "gres/gpu:a100=4" in m for m in result.messages), result.messages
    # Someone on the login node uses the account's 4 GPUs outside the console.
    outside = "outside-" + os.urandom(4).hex()
    local_slurm.run(
        "sbatch",
        f"--job-name={outside}",
        f"--account={ACCOUNT}",
        "--gres=gpu:a100:4",
        "--time=5",
        f"--output={local_slurm.jobs_dir}/%x-%j.out",
        "--wrap=sleep 300",
    )
    try:
        wait_for(
            lambda: local_slurm.run("squeue", "-h", f"--name={outside}", "-o", "%T").stdout.strip() == "RUNNING",
            "the outside job to hold the account's 4 GPUs",
        )
        workload = submit(personas, spec("held"), django_capture_on_commit_callbacks)
        held = wait_for(
            lambda: (services.reconcile_workloads() is not None)
            and (w := Workload.objects.get(pk=workload.pk)).state_reason == "AssocGrpGRES"
            and w,
            "the console to show Slurm's AssocGrpGRES",
        )
        assert held.state == "admitted"
    finally:
        local_slurm.run("scancel", f"--name={outside}", check=False)
    done = wait_for(reconciled(workload.pk, {"succeeded", "failed"}), "the held job to run once the GPUs are free")
    assert done.state == "succeeded", done.state_reason


def test_submissions_while_slurmctld_is_down_retry_and_land_once(
    slurm_fleet, personas, local_slurm, django_capture_on_commit_callbacks
):
    with mock.patch("apps.workloads.tasks.process_outbox_task.delay"):  # the worker runs later, by hand
        workloads = [submit(personas, spec(f"outage-{i}"), django_capture_on_commit_callbacks) for i in range(2)]
    entries = [OutboxEntry.objects.get(workload=w) for w in workloads]
    pid_file = Path(local_slurm.conf).parent.parent / "run" / "slurmctld.pid"
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    try:
        wait_for(lambda: local_slurm.run("scontrol", "ping", check=False).returncode != 0, "slurmctld to stop")
        for entry in entries:
            assert services.process_outbox_entry(entry.pk) == "retry"
            entry.refresh_from_db()
            assert entry.status == OutboxStatus.PENDING and entry.attempts == 1
            assert "controller" in entry.last_error.lower(), entry.last_error
    finally:
        started = local_slurm.script("start")
        assert started.returncode == 0, started.stderr
    OutboxEntry.objects.filter(pk__in=[e.pk for e in entries]).update(next_attempt_at=timezone.now() - timedelta(1))
    with mock.patch("apps.workloads.tasks.process_outbox_task.delay") as delay:
        assert services.drain_outbox() == 2
    for call in delay.call_args_list:
        assert services.process_outbox_entry(*call.args) == "submitted"
    for call in delay.call_args_list:  # a second delivery of the same task does nothing
        assert services.process_outbox_entry(*call.args) == "skipped"
    for workload in workloads:
        workload.refresh_from_db()
        assert workload.state in {"admitted", "running", "succeeded"}, workload.state_reason
        jobs = subprocess.run(
            ["squeue", "-h", "--states=all", f"--name={workload.backend_name}", "-o", "%i"],
            capture_output=True,
            text=True,
            env=local_slurm.env(),
            check=True,
        ).stdout.split()
        assert len(jobs) == 1, jobs  # none lost, none duplicated


def test_a_job_requeued_after_its_run_died_runs_again_under_its_new_name(
    slurm_fleet, personas, local_slurm, django_capture_on_commit_callbacks
):
    """Issue 19: on-call requeues a training job whose run died (here its process exits 1 on the first run, as it
    would when its GPU falls off the bus). The new run is a new Slurm job under the run's new name, even when
    reconcile comes between its dispatch and the worker's submit (the tick's order in production)."""
    from apps.tenancy.services.admissions import run_admission_pass
    from apps.workloads.services.outbox import drain_outbox
    from apps.workloads.services.reconcile import dispatch_admitted
    from apps.workloads.services.requeue import FAULT, requeue_workload

    marker = Path(local_slurm.jobs_dir) / f"first-run-{os.urandom(4).hex()}"  # every node sees the jobs directory
    script = f"if [ -e {marker} ]; then sleep 2; else touch {marker}; exit 1; fi"
    workload = submit(personas, spec("rerun", command=["sh"], args=["-c", script]), django_capture_on_commit_callbacks)
    first = workload.backend_name
    died = wait_for(reconciled(workload.pk, {"failed", "succeeded"}), "the first run to end")
    assert died.state == "failed" and marker.exists(), died.state_reason

    requeued = requeue_workload(fresh(personas.oncall), died, cause=FAULT, reason="XID 79 on its GPU")
    assert requeued.state == "pending" and requeued.backend_name == f"wl{workload.pk}r1-rerun"
    run_admission_pass()
    assert dispatch_admitted() == 1
    services.reconcile_workloads()  # the worker has not submitted the new run yet: Slurm does not know its name
    assert Workload.objects.get(pk=workload.pk).state == "admitted"
    with django_capture_on_commit_callbacks(execute=True):
        assert drain_outbox() == 1
    done = wait_for(reconciled(workload.pk, {"succeeded", "failed"}), "the new run to finish")
    assert done.state == "succeeded", done.state_reason
    # Two Slurm jobs: the first run's, failed, and the new run's, completed.
    expected = sorted([f"{first}|FAILED", f"{done.backend_name}|COMPLETED"])

    def accounted():
        argv = ["sacct", "-X", "-n", "-P", "-a", "-o", "JobName,State", f"--name={first},{done.backend_name}"]
        return sorted(local_slurm.run(*argv).stdout.split()) == expected

    wait_for(accounted, "sacct to record both runs")
