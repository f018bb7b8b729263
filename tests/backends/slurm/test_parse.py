"""Slurm's formats the backend reads and writes, without a cluster: node lists, GRES strings, job JSON,
and the translation of #SBATCH lines into slurmrestd's v0.0.38 job description."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apps.backends.base import PermanentBackendError
from apps.backends.render.workload import render_slurm
from apps.backends.slurm import parse
from apps.backends.slurm.backend import SlurmBackend
from apps.backends.slurm.rest import job_properties
from apps.backends.slurm.script import sbatch_script
from apps.backends.slurm.settings import SlurmSettings
from apps.backends.types import BackendState, WorkloadSpec
from apps.fleet.models import Cluster
from tests.backends.console_specs import console_spec
from tests.render.workload.cases import spec_of

SETTINGS = SlurmSettings(cluster="c", output_dir="/shared/out", job_path="/opt/bin:/usr/bin")


def test_hostnames_expand_slurm_node_lists():
    assert parse.hostnames("gpu-[01-03,07],login1,n[8-10]x") == [
        "gpu-01", "gpu-02", "gpu-03", "gpu-07", "login1", "n8x", "n9x", "n10x",
    ]  # fmt: skip
    assert parse.hostnames("") == []


@pytest.mark.parametrize(
    ("gres", "expected"),
    [
        ("gpu:a100:8", ("a100", 8)),
        ("gpu:a100:8(S:0-1),shard:16", ("a100", 8)),
        ("shard:4,gpu:2", ("", 2)),
        ("(null)", ("", 0)),
    ],
)
def test_gpu_gres(gres, expected):
    assert parse.gpu_gres(gres) == expected


@pytest.mark.parametrize(
    ("gres", "expected"),
    [
        ("gpu:a100:8(S:0-1),ib:1", {"gres/ib": 1}),  # a fabric's GRES, as Slurm's TRES names it
        ("gpu:a100:8,shard:16,mps:100", {}),  # GPUs and their shares are counted as GPUs
        ("nic:cx7:8(S:0-1),gpu:8", {"gres/nic:cx7": 8}),
        ("(null)", {}),
        ("", {}),
    ],
)
def test_a_nodes_other_gres_are_its_extended_resources(gres, expected):
    assert parse.other_gres(gres) == expected


def test_gpu_indexes_of_a_gres_detail():
    assert parse.indexes("gpu:a100:3(IDX:0-1,4)") == [0, 1, 4]
    assert parse.indexes("gpu:a100:0(IDX:N/A)") == []


def test_job_states_and_reasons():
    pending = {"job_id": 7, "job_state": "PENDING", "state_reason": "AssocGrpGRES", "state_description": ""}
    assert parse.job_status(pending, "x").reason == "AssocGrpGRES"
    described = {
        **pending,
        "state_reason": "ReqNodeNotAvail",
        "state_description": "ReqNodeNotAvail, UnavailableNodes:n1",
    }
    assert parse.job_status(described, "x").reason.endswith("UnavailableNodes:n1")
    # A job Slurm stopped at its time limit (--time, the spec's max runtime) timed out: not an ordinary failure.
    timeout = parse.job_status({"job_id": 7, "job_state": "TIMEOUT", "end_time": 100}, "x")
    assert timeout.state == BackendState.TIMED_OUT and timeout.reason.startswith("TIMEOUT")
    assert timeout.finished_at is not None
    accounted = parse.accounting_status(
        {"job_id": 7, "state": {"current": "TIMEOUT"}, "time": {"start": 40, "end": 100}}, "x"
    )
    assert (accounted.state, accounted.reason) == (BackendState.TIMED_OUT, "TIMEOUT: the job ran past its time limit")
    assert parse.job_status({"job_state": "DEADLINE"}, "x").state == BackendState.FAILED  # --deadline: not a limit
    assert parse.job_status({"job_state": "PREEMPTED"}, "x").state == BackendState.PREEMPTED
    assert parse.job_status({"job_state": "NODE_FAIL"}, "x").reason.startswith("NODE_FAIL")


def test_usage_reads_typed_and_untyped_gpu_tres():
    tres = {
        "allocated": [{"type": "gres", "name": "gpu", "count": 8}, {"type": "gres", "name": "gpu:a100", "count": 8}]
    }
    assert parse.gpu_tres({"tres": tres}) == ("a100", 8)
    assert parse.gpu_tres({"tres": {"allocated": [{"type": "cpu", "name": None, "count": 4}]}}) == ("", 0)


def test_the_console_spec_is_rendered_with_the_clusters_settings_and_a_bare_spec_refused():
    spec = console_spec(
        "w1", tenant="t", gpu_model="a100", workers=2, gpus_per_worker=4, command=["echo", "$(id)"], slurm_account="t_x"
    )
    connection = {
        "partition": "batch",
        "output_dir": "/shared/out",
        "gres_models": {"a100_80g": "a100"},
        "containers": "none",
    }
    backend = SlurmBackend(Cluster(name="c", kind="slurm", connection=connection))
    script = sbatch_script(spec, backend.settings)
    assert "#SBATCH --nodes=2\n" in script and "#SBATCH --gres=gpu:a100_80g:4\n" in script
    assert "#SBATCH --partition=batch\n" in script and "#SBATCH --account=t_x\n" in script
    assert "#SBATCH --output=/shared/out/w1-%j.out\n" in script
    assert script.rstrip().endswith("-- echo '$(id)'")
    # What the workload page shows is what is submitted.
    assert backend.render(spec.source, spec.context).script == script
    with pytest.raises(PermanentBackendError, match="nothing to run"):
        sbatch_script(WorkloadSpec(name="w2", tenant="t", command=["true"]), SETTINGS)
    with pytest.raises(PermanentBackendError, match="cannot render the sbatch script: account"):
        sbatch_script(console_spec("w3", slurm_account="Bad Account"), backend.settings)


def test_an_image_is_refused_where_the_cluster_names_no_container_runtime():
    """Without `containers` in the connection, the spec's image is neither run nor silently dropped."""
    spec = console_spec("w1", tenant="t", gpu_model="a100", image="nvcr.io/nvidia/pytorch:24.08-py3", slurm_account="t")
    with pytest.raises(PermanentBackendError) as caught:
        sbatch_script(spec, SETTINGS)
    message = str(caught.value)
    assert message.startswith("cannot render the sbatch script: image: 'nvcr.io/nvidia/pytorch:24.08-py3'")
    assert 'containers: "pyxis"' in message
    pyxis = replace(SETTINGS, containers="pyxis")
    assert "srun --kill-on-bad-exit=1 '--container-image=nvcr.io#nvidia/pytorch:24.08-py3' torchrun" in (
        sbatch_script(spec, pyxis)
    )
    with pytest.raises(PermanentBackendError, match=r"connection\.containers 'docker' is not one of pyxis, none"):
        SlurmSettings.of(Cluster(name="c", kind="slurm", connection={"containers": "docker"}))
    with pytest.raises(PermanentBackendError, match="volume_dirs"):
        SlurmSettings.of(Cluster(name="c", kind="slurm", connection={"volume_dirs": {"data": "relative"}}))


@pytest.mark.parametrize("value", ["relative/dir", "/etc/../root", "/a b", "/x;y", 7])
def test_the_secrets_dir_must_be_a_plain_absolute_directory(value):
    with pytest.raises(PermanentBackendError, match=r"connection\.secrets_dir"):
        SlurmSettings.of(Cluster(name="c", kind="slurm", connection={"secrets_dir": value}))


def test_the_secrets_dir_is_kept_without_a_trailing_slash():
    settings = SlurmSettings.of(Cluster(name="c", kind="slurm", connection={"secrets_dir": "/etc/gpu-console/s/"}))
    assert settings.secrets_dir == "/etc/gpu-console/s"


def test_rest_job_description_from_the_workloads_renderer_script():
    from tests.render.workload.cases import slurm_context

    script = render_slurm(spec_of("slurm-training.sh"), slurm_context()).script
    job = job_properties(script, SETTINGS)
    assert job["account"] == "acme_train" and job["qos"] == "training" and job["partition"] == "gpu"
    assert job["nodes"][0] == job["nodes"][1] and job["tasks_per_node"] == 1
    assert job["tasks"] == job["nodes"][0]
    assert job["gres"].startswith("gpu:") and job["environment"] == {"PATH": "/opt/bin:/usr/bin"}
    assert job["current_working_directory"] == "/shared/out"


def test_rest_refuses_directives_v0038_cannot_express():
    with pytest.raises(PermanentBackendError, match="--switches"):
        job_properties("#!/bin/bash\n#SBATCH --switches=1\ntrue\n", SETTINGS)
    assert job_properties("#!/bin/bash\n#SBATCH --time=1-00:00:30\ntrue\n", SETTINGS)["time_limit"] == 1441


def test_usage_reads_the_controllers_tres_string():
    assert parse.tres_gpus("cpu=1,mem=1G,node=1,billing=1,gres/gpu=2,gres/gpu:a100=2") == ("a100", 2)
    assert parse.tres_gpus("cpu=1,mem=1G") == ("", 0)


def test_usage_reads_an_mps_jobs_share_of_a_gpu():
    """gres/mps counts 100 per GPU (https://slurm.schedmd.com/gres.html#MPS_Management): mps:25 on each of two
    nodes is half a GPU's time. A job holds gres/gpu or gres/mps, never both. The local cluster has no gres/mps:
    these are the strings Slurm writes for a site that tracks it (AccountingStorageTRES=gres/mps)."""
    assert parse.tres_gpus("cpu=2,mem=2G,node=2,billing=2,gres/mps=50") == ("", 0.5)
    assert parse.gpu_tres({"tres": {"allocated": [{"type": "gres", "name": "mps", "count": 25}]}}) == ("", 0.25)


def sinfo_node(state: str, flags: list[str], reason: str = "", user: str | None = None) -> dict:
    """One node of `sinfo --json` (22.05) as the local cluster prints it."""
    return {
        "name": "gpu-04",
        "state": state,
        "state_flags": flags,
        "reason": reason,
        "reason_set_by_user": user,
        "gres": "gpu:a100:8",
        "gres_used": "gpu:a100:0(IDX:N/A)",
        "partitions": ["gpu"],
        "cpus": 8,
        "real_memory": 64000,
        "features": "",
        "active_features": "",
    }


@pytest.mark.parametrize(
    ("node", "source", "shown"),
    [
        (sinfo_node("down", ["NOT_RESPONDING"], "Not responding", "root"), "slurmctld", "slurmctld: Not responding"),
        (sinfo_node("idle", ["DRAIN"], "Kill task failed", "slurm"), "slurmctld", "slurmctld: Kill task failed"),
        (
            sinfo_node("down", [], "Node unexpectedly rebooted boot_time=1718000000 last response=1718000100"),
            "slurmctld",
            "slurmctld: Node unexpectedly rebooted boot_time=1718000000 last response=1718000100",
        ),
        (
            sinfo_node("idle", ["DRAIN"], "gres/gpu count reported lower than configured (0 < 8)", "slurm"),
            "slurmctld",
            "slurmctld: gres/gpu count reported lower than configured (0 < 8)",
        ),
        (sinfo_node("idle", ["DRAIN"], "Prolog error", "slurm"), "slurmctld", "slurmctld: Prolog error"),
        (sinfo_node("down", ["NOT_RESPONDING"]), "slurmctld", "slurmctld: not responding"),
        (sinfo_node("idle", ["DRAIN"], "PSU failure", "root"), "admin", "admin: PSU failure"),
        (sinfo_node("idle", ["DRAIN"], "console: xid 79", "root"), "console", "console: xid 79"),
        (sinfo_node("idle", []), "", ""),
    ],
    ids=["not-responding", "kill-task", "rebooted", "gres-count", "prolog", "no-reason", "admin", "console", "idle"],
)
def test_who_took_a_node_out_of_service(node, source, shown):
    info = parse.node_info(node, SETTINGS, {})
    assert info.state_reason == shown
    assert info.labels.get("slurm.schedmd.com/drained-by", "") == source


@pytest.mark.parametrize(
    ("state", "flags", "allocatable"),
    [
        ("idle", [], 8),
        ("mixed", [], 8),
        ("down", ["NOT_RESPONDING"], 0),
        ("idle", ["NOT_RESPONDING"], 0),
        ("idle", ["DRAIN"], 8),
        ("mixed", ["DRAIN"], 8),
        ("down", [], 0),
    ],
)
def test_gpus_of_a_node_slurm_cannot_allocate_on_are_not_allocatable(state, flags, allocatable):
    """Down and not responding: nothing allocatable. Drained: allocatable (as a cordoned Kubernetes node) but
    unschedulable, so none of it is free."""
    info = parse.node_info(sinfo_node(state, flags, "x" if flags or state == "down" else ""), SETTINGS, {})
    assert info.gpu_allocatable == allocatable and len(info.gpus) == 8
    if "DRAIN" in flags:
        assert info.unschedulable


@pytest.mark.parametrize(
    ("raw", "shown"),
    [(768, "exit code 3"), (256, "exit code 1"), (65280, "exit code 255"), (15, "signal 15"), (9, "signal 9")],
)
def test_the_controllers_exit_code_is_a_wait_status(raw, shown):
    """squeue --json and slurmrestd give the raw wait status (seen on 22.05: `exit 3` -> 768, sacct 3:0;
    a SIGTERM -> 15, sacct 0:15)."""
    assert parse.wait_status(raw) == shown
    failed = parse.job_status({"job_id": 7, "job_state": "FAILED", "exit_code": raw, "end_time": 100}, "x")
    assert failed.reason.startswith(f"FAILED: {shown}")


def test_sacct_exit_codes_win_and_accountings_json_is_read_only_for_signals():
    assert parse.sacct_exit("3:0") == "exit code 3" and parse.sacct_exit("0:15") == "signal 15"
    assert parse.sacct_exit("") is None
    # A launch failure: the controller holds 1 (a signal, as scontrol shows 0:1), sacct says 1:0.
    launch = {"job_id": 7, "job_state": "FAILED", "exit_code": 1, "state_reason": "JobLaunchFailure"}
    assert parse.job_status(launch, "x", parse.sacct_exit("1:0")).reason == "FAILED: exit code 1 (JobLaunchFailure)"
    # sacct --json (22.05) for a job that exited 3: SUCCESS with return code 0; a signal is given right.
    exited = {"job_id": 7, "state": {"current": "FAILED"}, "exit_code": {"status": "SUCCESS", "return_code": 0}}
    signaled = {
        "job_id": 8,
        "state": {"current": "FAILED"},
        "exit_code": {"status": "SIGNALED", "return_code": None, "signal": {"signal_id": 15, "name": "Terminated"}},
    }
    assert parse.accounting_status(exited, "x").reason == "FAILED: exit code unknown"
    assert parse.accounting_status(exited, "x", "exit code 3").reason == "FAILED: exit code 3"
    assert parse.accounting_status(signaled, "x").reason == "FAILED: signal 15"
