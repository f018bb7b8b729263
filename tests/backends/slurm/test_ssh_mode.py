"""The Slurm backend in SSH mode: every CLI call runs on a "login node" (a private sshd on 127.0.0.1:8801,
tests/sshd_login_node.py) through `ssh_host` / `ssh_options`, against the real local cluster."""

from __future__ import annotations

import os
import uuid

import pytest

from apps.backends.base import RetryableBackendError
from apps.backends.slurm.backend import SlurmBackend
from apps.backends.slurm.cli import Cli
from apps.backends.types import BackendState
from apps.fleet.models import Cluster
from tests.backends.slurm import test_contract
from tests.backends.slurm.conftest import NODES, connection

UNUSED_PORT = 8809  # in this suite's port range, nothing listens on it

# Every character a shell would act on: quotes, expansion, substitution, globbing, separators, redirection.
HOSTILE = """it's "quoted" $(touch {marker}) `touch {marker}` $HOME * ; | & > {marker} \\ end"""


def ssh_backend(local_slurm, login_node, port: int | None = None) -> SlurmBackend:
    conn = connection(local_slurm, ssh_host=login_node.host, ssh_options=login_node.options(port))
    del conn["slurm_conf"]  # the login node's own SLURM_CONF (sshd's SetEnv) is what the remote CLI uses
    return SlurmBackend(Cluster(name="gpuc", kind="slurm", connection=conn))


class TestSlurmOverSshContract(test_contract.TestSlurmContract):
    """The whole Backend contract, every call going through ssh."""

    @pytest.fixture
    def backend(self, local_slurm, ssh_login_node, db):
        return ssh_backend(local_slurm, ssh_login_node)

    # Slurm takes a minute or more to stop a job at its time limit (minutes, checked every 30 s). Over SSH the
    # status is read by the same squeue/sacct calls as in mode "cli", whose contract run covers it.
    test_a_run_its_max_runtime_stops_is_timed_out = None


def test_connection_says_it_runs_over_ssh(local_slurm, ssh_login_node):
    report = ssh_backend(local_slurm, ssh_login_node).test_connection()
    assert report.ok, report.message
    assert "22.05" in report.server_version  # sinfo --version, run on the login node
    assert "every call runs Slurm's CLI over SSH on root@127.0.0.1" in report.notes


def test_inventory_over_ssh_is_the_four_nodes_of_eight_a100(local_slurm, ssh_login_node):
    inventory = ssh_backend(local_slurm, ssh_login_node).inventory()
    assert sorted(n.name for n in inventory.nodes) == NODES
    for node in inventory.nodes:
        assert [g.model for g in node.gpus] == ["a100"] * 8


def test_drain_and_resume_over_ssh_keep_the_console_prefix(local_slurm, ssh_login_node, cleanup):
    backend, node = ssh_backend(local_slurm, ssh_login_node), "gpu-02"
    cleanup[1].add(node)
    backend.drain(node, "fan failure")
    assert local_slurm.run("sinfo", "-h", "-n", node, "-o", "%E").stdout.strip() == "console: fan failure"
    info = next(n for n in backend.inventory().nodes if n.name == node)
    assert info.unschedulable and info.state_reason == "console: fan failure"
    backend.resume(node)
    assert not next(n for n in backend.inventory().nodes if n.name == node).unschedulable


def test_an_argument_full_of_shell_syntax_reaches_the_remote_command_as_one_word(local_slurm, ssh_login_node, tmp_path):
    marker = tmp_path / "shell-ran"
    hostile = HOSTILE.format(marker=marker)
    cli = Cli(ssh_backend(local_slurm, ssh_login_node).settings)
    # printf prints each argument on its own line: one word in, one line out, byte for byte.
    assert cli.run(["printf", "%s\n", hostile, "second word"]) == f"{hostile}\nsecond word\n"
    assert not marker.exists()


def test_a_drain_reason_full_of_shell_syntax_is_kept_verbatim_by_slurm(local_slurm, ssh_login_node, cleanup, tmp_path):
    marker = tmp_path / "shell-ran"
    hostile = HOSTILE.format(marker=marker)
    backend, node = ssh_backend(local_slurm, ssh_login_node), "gpu-04"
    cleanup[1].add(node)
    backend.cordon(node, hostile)
    shown = local_slurm.run("scontrol", "show", "node", node).stdout
    assert f"Reason=console: {hostile} [root@" in shown
    assert next(n for n in backend.inventory().nodes if n.name == node).state_reason == f"console: {hostile}"
    assert not marker.exists()
    backend.resume(node)


def test_a_job_named_with_spaces_and_quotes_is_found_and_cancelled_by_that_name(local_slurm, ssh_login_node, cleanup):
    name = f'it\'s a "job" $(true) {uuid.uuid4().hex[:8]}'
    cleanup[0].append(name)
    backend = ssh_backend(local_slurm, ssh_login_node)
    output = f"--output={local_slurm.jobs_dir}/ssh-%j.out"
    local = local_slurm.run("sbatch", "--parsable", f"--job-name={name}", "--partition=gpu", output, "--wrap=sleep 600")
    job_id = local.stdout.strip()
    assert backend.status([name])[name].state in (BackendState.PENDING, BackendState.RUNNING)
    # cancel looks the job up with `squeue --name=<name>`, run on the login node through ssh
    assert backend.cancel(name).state == BackendState.CANCELLED
    assert backend.status([job_id])[job_id].state == BackendState.CANCELLED
    shown = local_slurm.run("squeue", "--noheader", "--states=all", f"--jobs={job_id}", "--format=%j").stdout
    assert shown.strip() == name


def test_a_login_node_that_does_not_answer_is_a_retryable_error_naming_ssh(local_slurm, ssh_login_node):
    backend = ssh_backend(local_slurm, ssh_login_node, port=UNUSED_PORT)
    with pytest.raises(RetryableBackendError, match=r"ssh to root@127\.0\.0\.1 failed: .*port 8809.*refused"):
        backend.inventory()
    report = backend.test_connection()
    assert not report.ok and "ssh to root@127.0.0.1 failed" in report.message


def test_a_command_without_input_never_reads_the_callers_stdin(local_slurm, ssh_login_node):
    """ssh forwards its stdin to the remote command: a call without input must not consume the worker's."""
    cli = Cli(ssh_backend(local_slurm, ssh_login_node).settings)
    read_end, write_end = os.pipe()
    os.write(write_end, b"the caller's own input\n")
    os.close(write_end)
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        assert cli.run(["cat"]) == ""
        assert os.read(0, 100) == b"the caller's own input\n"  # still there for its owner
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read_end)
    assert cli.run(["cat"], stdin="given input\n") == "given input\n"
