"""The Slurm backend against the real local cluster: gang jobs, Slurm's refusals, drain/resume with reasons,
usage as sacct reports it, quota push (dry-run diff, apply, GrpTRES holding), cancel verification."""

from __future__ import annotations

import os
import re
import signal
from dataclasses import replace
from pathlib import Path

import pytest

from apps.backends.base import NotFoundError, PermanentBackendError
from apps.backends.render.desired import DesiredState, GpuModelRef, QueueSpec, QuotaLine, TenantSpec, TierSpec
from apps.backends.slurm.backend import SlurmBackend
from apps.backends.types import BackendState, WorkloadSpec
from apps.fleet.models import Cluster
from tests.backends.slurm.conftest import connection, sleep_spec, unique, wait_for

DONE = {BackendState.SUCCEEDED, BackendState.FAILED, BackendState.CANCELLED}


def job_script(name: str, node: str, jobs_dir: str, *, gpus: int = 1, account: str = "") -> str:
    """An sbatch script that sleeps 2 s, pinned to `node` unless it is empty."""
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --gres=gpu:a100:{gpus}",
        "#SBATCH --time=5",
        f"#SBATCH --output={jobs_dir}/%x-%j.out",
    ]
    if node:
        lines.append(f"#SBATCH --nodelist={node}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    return "\n".join([*lines, "sleep 2", ""])


def state_of(backend, name):
    return backend.status([name])[name]


def wait_state(backend, name, states, timeout=60.0):
    return wait_for(lambda: (s := state_of(backend, name)).state in states and s, f"{name} in {states}", timeout)


def test_two_gpu_job_runs_on_two_gpus_and_completes(slurm_backend, cleanup):
    name = unique("two")
    cleanup[0].append(name)
    result = slurm_backend.submit(sleep_spec(name, gpus_per_worker=2))
    assert result.backend_id == name and re.match(r"Slurm job \d+", result.reason)
    running = wait_state(slurm_backend, name, {BackendState.RUNNING})
    [placement] = running.placements
    assert len(placement.gpu_indexes) == 2
    done = wait_state(slurm_backend, name, DONE)
    assert done.state == BackendState.SUCCEEDED and done.finished_at is not None


def test_gang_job_of_four_nodes_by_eight_gpus_runs_on_all_four(slurm_backend, cleanup):
    name = unique("gang")
    cleanup[0].append(name)
    slurm_backend.submit(sleep_spec(name, seconds=3, workers=4, gpus_per_worker=8))
    running = wait_state(slurm_backend, name, {BackendState.RUNNING})
    assert {p.node for p in running.placements} == {"gpu-01", "gpu-02", "gpu-03", "gpu-04"}
    assert all(p.gpu_indexes == list(range(8)) for p in running.placements)
    held = [g for n in slurm_backend.inventory().nodes for g in n.gpus if name in g.allocated_to]
    assert len(held) == 32
    assert wait_state(slurm_backend, name, DONE).state == BackendState.SUCCEEDED


@pytest.mark.parametrize(
    "fields",
    [{"gpus_per_worker": 9}, {"gpu_model": "h100"}, {"workers": 5, "gpus_per_worker": 1}],
    ids=["9-gpus-on-an-8-gpu-node", "unknown-gpu-type", "5-nodes-of-4"],
)
def test_impossible_job_is_a_permanent_error_with_slurms_message(slurm_backend, cleanup, fields):
    name = unique("impossible")
    cleanup[0].append(name)
    with pytest.raises(PermanentBackendError) as caught:
        slurm_backend.submit(sleep_spec(name, **fields))
    message = str(caught.value)
    assert "Batch job submission failed" in message
    assert "Requested node configuration is not available" in message or "Node count specification" in message


def test_drained_node_holds_a_pinned_job_with_the_reason_then_resume_runs_it(slurm_backend, cleanup, local_slurm):
    node, name = "gpu-03", unique("pinned")
    cleanup[0].append(name)
    cleanup[1].add(node)
    slurm_backend.drain(node, "xid 79 on GPU 3")
    info = next(n for n in slurm_backend.inventory().nodes if n.name == node)
    assert info.unschedulable and info.state_reason == "console: xid 79 on GPU 3"
    assert info.labels["slurm.schedmd.com/drained-by"] == "console"

    spec = WorkloadSpec(name=name, tenant="t", manifest=job_script(name, node, local_slurm.jobs_dir))
    slurm_backend.submit(spec)
    pending = wait_for(
        lambda: (s := state_of(slurm_backend, name)).state == BackendState.PENDING
        and "ReqNodeNotAvail" in s.reason
        and s,
        "the pinned job to wait for its node",
    )
    assert node in pending.reason
    slurm_backend.resume(node)
    assert not next(n for n in slurm_backend.inventory().nodes if n.name == node).unschedulable
    running = wait_state(slurm_backend, name, {BackendState.RUNNING, BackendState.SUCCEEDED})
    if running.state == BackendState.RUNNING:
        assert {p.node for p in running.placements} == {node}
    assert wait_state(slurm_backend, name, DONE).state == BackendState.SUCCEEDED


def test_a_node_an_admin_drained_is_reported_and_never_resumed_by_the_console(slurm_backend, cleanup, local_slurm):
    node = "gpu-04"
    cleanup[1].add(node)
    local_slurm.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=PSU failure")
    info = next(n for n in slurm_backend.inventory().nodes if n.name == node)
    assert info.unschedulable and info.state_reason == "admin: PSU failure"
    assert info.labels["slurm.schedmd.com/drained-by"] == "admin"

    with pytest.raises(PermanentBackendError, match="drained by root outside the console"):
        slurm_backend.resume(node)
    slurm_backend.cordon(node, "console wants it too")  # keeps the admin's reason
    shown = local_slurm.run("sinfo", "-h", "-n", node, "-o", "%T|%E").stdout.strip()
    assert shown == "drained|PSU failure"


def test_usage_is_gpus_times_the_seconds_sacct_reports(slurm_backend, cleanup, local_slurm):
    since = slurm_backend.inventory().taken_at
    name = unique("usage")
    cleanup[0].append(name)
    slurm_backend.submit(sleep_spec(name, seconds=2, gpus_per_worker=2))
    assert wait_state(slurm_backend, name, DONE).state == BackendState.SUCCEEDED

    def accounted():
        out = local_slurm.run("sacct", "-X", "-n", "-P", f"--name={name}", "-o", "ElapsedRaw,AllocTRES,State").stdout
        return out.strip() if "COMPLETED" in out else None

    elapsed, tres, _ = wait_for(accounted, "sacct to record the job").split("|")
    gpus = int(re.search(r"gres/gpu=(\d+)", tres).group(1))
    [record] = [r for r in slurm_backend.usage_since(since) if r.backend_id == name]
    assert gpus == 2 and record.gpu_model == "a100" and record.gpu_fraction == 2
    assert record.gpu_seconds == gpus * int(elapsed)


def test_cancel_verifies_and_unknown_ids_are_not_found(slurm_backend, cleanup):
    name = unique("cancel")
    cleanup[0].append(name)
    slurm_backend.submit(sleep_spec(name, seconds=600))
    wait_state(slurm_backend, name, {BackendState.RUNNING})
    assert slurm_backend.cancel(name).state == BackendState.CANCELLED
    with pytest.raises(NotFoundError):
        slurm_backend.cancel("99999999")  # scancel itself exits 0 for this


def commands_of(backend: SlurmBackend, calls: list[str]):
    """Wrap the backend's Cli.call to record which Slurm commands a call runs."""
    real = backend.cli.call

    def call(argv, **kwargs):
        calls.append(argv[0])
        return real(argv, **kwargs)

    return call


def test_a_first_attempt_runs_sbatch_alone_and_a_retry_finds_the_job_in_the_controller(slurm_backend, cleanup):
    """Issue 23 part 3: the outbox's first try of an entry (nothing can have submitted the name yet) costs one
    sbatch; a retry (a worker killed between sbatch and recording) finds the job by name in the controller,
    without accounting and without a second job."""
    name = unique("first")
    cleanup[0].append(name)
    calls: list[str] = []
    spec = replace(sleep_spec(name, seconds=600), first_attempt=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(slurm_backend.cli, "call", commands_of(slurm_backend, calls))
        first = slurm_backend.submit(spec)
        assert calls == ["sbatch"], calls
        calls.clear()
        again = slurm_backend.submit(replace(spec, first_attempt=False))
        assert calls == ["squeue"], calls  # held by the controller: no sacct, no sbatch
    assert first.reason.startswith("Slurm job ") and again.reason == f"{first.reason} (already submitted)"
    jobs = slurm_backend.cli.run(["squeue", "-h", "--states=all", f"--name={name}", "-o", "%A"]).split()
    assert len(jobs) == 1, jobs


def test_a_retry_of_a_name_slurm_never_saw_looks_in_accounting_then_submits(slurm_backend, cleanup):
    name = unique("retry")
    cleanup[0].append(name)
    calls: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(slurm_backend.cli, "call", commands_of(slurm_backend, calls))
        slurm_backend.submit(sleep_spec(name, seconds=600))  # first_attempt False: the default
    assert calls == ["squeue", "sacct", "sbatch"], calls


def quota_state(tenant: str, account: str, *, limit: int) -> DesiredState:
    return DesiredState(
        cluster="gpuc",
        tenants=(TenantSpec(tenant, tenant, None),),
        queues=(QueueSpec(tenant, "train", slurm_account=account, quotas=(QuotaLine("a100", limit, 0),)),),
        tiers=(TierSpec("gpuc-high", 1000, False, False), TierSpec("gpuc-low", 100, True, True)),
        gpu_models=(GpuModelRef("a100", "A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB", "a100"),),
    )


def test_quota_push_diffs_applies_converges_and_grptres_holds(slurm_backend, cleanup, local_slurm):
    tenant = unique("qt").replace("-", "")
    account = f"{tenant}_train"
    pusher = slurm_backend.quota_pusher()
    state = quota_state(tenant, account, limit=4)
    try:
        plan = pusher.plan(state)
        diff = "\n".join(plan.diff())
        assert f"add account {tenant} under root" in diff and f"add account {account} under {tenant}" in diff
        assert f"add user root to account {account}" in diff
        assert re.search(rf"account {account}: .*grptres \(none\) -> gres/gpu=4,gres/gpu:a100=4", diff), diff
        # A dry run changes nothing.
        assert account not in local_slurm.run("sacctmgr", "-n", "-P", "show", "account", "format=account").stdout
        result = pusher.apply(plan)
        assert result.applied == len(plan.changes)
        again = pusher.plan(state)
        assert again.changes == [] and again.unchanged == result.applied + plan.unchanged
        assoc = local_slurm.run(
            "sacctmgr", "-n", "-P", "show", "assoc", f"account={account}", "format=user,grptres,qos,defaultqos"
        ).stdout
        assert "|gres/gpu:a100=4,gres/gpu=4|gpuc-high,gpuc-low|gpuc-low" in assoc
        qos = local_slurm.run("sacctmgr", "-n", "-P", "show", "qos", "gpuc-high", "format=preempt,preemptmode").stdout
        assert qos.strip() == "gpuc-low|cluster"

        over, within = unique("over"), unique("within")
        cleanup[0].extend([over, within])
        script = job_script(over, "", local_slurm.jobs_dir, gpus=8, account=account)
        slurm_backend.submit(WorkloadSpec(name=over, tenant=tenant, manifest=script))
        waiting = wait_for(
            lambda: (s := state_of(slurm_backend, over)).reason.startswith("AssocGrp") and s,
            "the job beyond GrpTRES to wait on its association's limit",
        )
        assert waiting.state == BackendState.PENDING and waiting.reason == "AssocGrpGRES"
        fits = job_script(within, "gpu-01", local_slurm.jobs_dir, gpus=2, account=account)
        slurm_backend.submit(WorkloadSpec(name=within, tenant=tenant, manifest=fits))
        assert wait_state(slurm_backend, within, DONE).state == BackendState.SUCCEEDED
        assert state_of(slurm_backend, over).state == BackendState.PENDING
    finally:
        for name in cleanup[0]:
            local_slurm.run("scancel", f"--name={name}", check=False)
        local_slurm.run("sacctmgr", "-i", "delete", "account", account, check=False)
        local_slurm.run("sacctmgr", "-i", "delete", "account", tenant, check=False)


def test_quota_plan_previews_the_push_of_a_desired_state_and_changes_nothing(db, slurm_backend, local_slurm):
    tenant = unique("qp").replace("-", "")
    changes = slurm_backend.quota_plan(quota_state(tenant, f"{tenant}_train", limit=4))
    described = "\n".join(c.describe() for c in changes if c.action == "change")
    assert f"add account {tenant} under root" in described and f"add account {tenant}_train" in described
    assert tenant not in local_slurm.run("sacctmgr", "-n", "-P", "show", "account", "format=account").stdout


def test_quota_push_checks_the_clusters_live_accounting_configuration(slurm_backend, local_slurm):
    """The local cluster runs with AccountingStorageTRES=...,gres/gpu,gres/gpu:a100 and
    AccountingStorageEnforce=associations,limits,qos (scontrol show config): a push of a100 limits warns about
    neither; an h100 model, which the cluster does not account, is named and its limit left out."""
    config = local_slurm.run("scontrol", "show", "config").stdout
    assert re.search(r"AccountingStorageTRES\s*=.*gres/gpu:a100", config)
    tenant = unique("qc").replace("-", "")
    plan = slurm_backend.quota_pusher().plan(quota_state(tenant, f"{tenant}_train", limit=4))
    assert not [m for m in plan.messages if "AccountingStorage" in m], plan.messages

    state = quota_state(tenant, f"{tenant}_train", limit=4)
    h100 = GpuModelRef("h100", "H100-SXM5-80GB", "NVIDIA-H100-80GB-HBM3", "h100")
    queue = replace(state.queues[0], quotas=(*state.queues[0].quotas, QuotaLine("h100", 2, 0)))
    plan = slurm_backend.quota_pusher().plan(replace(state, queues=(queue,), gpu_models=(*state.gpu_models, h100)))
    [message] = [m for m in plan.messages if "AccountingStorage" in m]
    assert message.startswith("AccountingStorageTRES lacks gres/gpu:h100 (scontrol show config: ")
    limits = [a for c in plan.changes for a in c.argv if a.startswith("GrpTRES=")]
    assert limits and all("gres/gpu:a100=4" in a and "h100" not in a for a in limits), limits


def test_a_node_slurmctld_marks_down_is_the_controllers_and_its_gpus_are_not_allocatable(slurm_backend, local_slurm):
    """A node failure as on a real cluster: gpu-04's slurmd is killed, and after SlurmdTimeout slurmctld sets it
    DOWN+NOT_RESPONDING with reason "Not responding" (user SlurmUser). That is neither the console's nor an
    administrator's reason, and none of the node's GPUs can be allocated."""
    node = "gpu-04"
    pid_file = Path(local_slurm.conf).parent.parent / "run" / f"slurmd-{node}.pid"
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    try:
        wait_for(
            lambda: "Not responding" in local_slurm.run("sinfo", "-h", "-n", node, "-o", "%T|%E").stdout,
            "slurmctld to mark the node not responding",
            timeout=150,
        )
        info = next(n for n in slurm_backend.inventory().nodes if n.name == node)
        assert info.state == "down" and info.unschedulable
        assert info.state_reason == "slurmctld: Not responding"
        assert info.labels["slurm.schedmd.com/drained-by"] == "slurmctld"
        assert info.gpu_allocatable == 0 and len(info.gpus) == 8
        with pytest.raises(PermanentBackendError, match="slurmctld took gpu-04 out of service"):
            slurm_backend.resume(node)
    finally:
        started = local_slurm.script("start")  # starts the slurmd again; ReturnToService=2 puts it back
        assert started.returncode == 0, started.stderr
    wait_for(
        lambda: local_slurm.run("sinfo", "-h", "-n", node, "-o", "%T").stdout.strip() == "idle",
        "the node to return to service",
    )
    back = next(n for n in slurm_backend.inventory().nodes if n.name == node)
    assert back.state == "ready" and back.gpu_allocatable == 8 and back.state_reason == ""


def exiting_script(name: str, jobs_dir: str, body: str) -> str:
    return "\n".join(
        [
            "#!/bin/bash",
            f"#SBATCH --job-name={name}",
            "#SBATCH --gres=gpu:a100:1",
            "#SBATCH --time=5",
            f"#SBATCH --output={jobs_dir}/%x-%j.out",
            body,
            "",
        ]
    )


def test_exit_codes_and_signals_are_shown_as_sacct_reports_them(slurm_backend, cleanup, local_slurm):
    """A job that exits 3 and one killed by SIGTERM: sacct says 3:0 and 0:15, squeue --json holds 768 and 15."""
    exits, killed = unique("exit3"), unique("sigterm")
    cleanup[0].extend([exits, killed])
    for name, body in ((exits, "exit 3"), (killed, "kill -TERM $$")):
        script = exiting_script(name, local_slurm.jobs_dir, body)
        slurm_backend.submit(WorkloadSpec(name=name, tenant="t", manifest=script))
    assert wait_state(slurm_backend, exits, DONE).reason.startswith("FAILED: exit code 3")
    assert wait_state(slurm_backend, killed, DONE).reason.startswith("FAILED: signal 15")
    expected = {f"{exits}|3:0", f"{killed}|0:15"}

    def accounted():
        out = local_slurm.run("sacct", "-X", "-n", "-P", "-a", f"--name={exits},{killed}", "-o", "JobName,ExitCode")
        return set(out.stdout.split()) == expected

    wait_for(accounted, "sacct to record both jobs")
    assert state_of(slurm_backend, exits).reason.startswith("FAILED: exit code 3")  # now from sacct
    assert state_of(slurm_backend, killed).reason.startswith("FAILED: signal 15")


def test_without_a_container_runtime_a_spec_with_an_image_reaches_no_slurm_job(local_slurm, cleanup):
    backend = SlurmBackend(Cluster(name="gpuc", kind="slurm", connection=connection(local_slurm, containers="")))
    name = unique("image")
    cleanup[0].append(name)
    with pytest.raises(PermanentBackendError) as caught:
        backend.submit(sleep_spec(name))
    assert "image: 'busybox:1.36' cannot run on this Slurm cluster" in str(caught.value)
    assert 'containers: "pyxis"' in str(caught.value)
    assert local_slurm.run("squeue", "-h", "--states=all", f"--name={name}").stdout.strip() == ""
    assert "specs with an image are refused" in " ".join(backend.test_connection().notes)


def test_the_connection_test_says_pyxis_is_not_loaded_where_srun_lacks_its_options(local_slurm):
    backend = SlurmBackend(Cluster(name="gpuc", kind="slurm", connection=connection(local_slurm, containers="pyxis")))
    report = backend.test_connection()
    assert not report.ok and report.features["pyxis"] is False
    assert "the pyxis SPANK plugin is not loaded" in report.message
