"""Mode "rest": reads, submission and cancel through the real slurmrestd (JWT), the rest through the CLI.

The whole Backend contract runs again in this mode, plus what only REST can get wrong: the JWT, an
unreachable slurmrestd, Slurm's refusal passed through, and what v0.0.38 cannot express.
"""

from __future__ import annotations

import pytest

from apps.backends.base import PermanentBackendError, RetryableBackendError
from apps.backends.slurm.backend import SlurmBackend
from apps.backends.types import BackendState, WorkloadSpec
from apps.fleet.models import Cluster
from tests.backends.slurm import test_contract  # the module, so pytest does not collect its class here again
from tests.backends.slurm.conftest import connection, sleep_spec, unique, wait_for

TOKEN_ENV = "GPUC_SECRET_TEST_SLURM_JWT"


def rest_backend(local_slurm, monkeypatch, token=None, **extra) -> SlurmBackend:
    monkeypatch.setenv(TOKEN_ENV, local_slurm.token() if token is None else token)
    extra.setdefault("restd_url", local_slurm.restd_url)
    conn = connection(local_slurm, mode="rest", restd_user="root", **extra)
    return SlurmBackend(Cluster(name="gpuc", kind="slurm", connection=conn, secret_env=TOKEN_ENV))


class TestSlurmRestContract(test_contract.TestSlurmContract):
    @pytest.fixture
    def backend(self, local_slurm, db, monkeypatch):
        return rest_backend(local_slurm, monkeypatch)


def test_connection_reports_rest_and_what_goes_through_the_cli(local_slurm, monkeypatch):
    report = rest_backend(local_slurm, monkeypatch).test_connection()
    assert report.ok and report.features["rest"]
    assert any("slurmrestd v0.0.38 has no node update" in note for note in report.notes)
    assert any(f"via slurmrestd at {local_slurm.restd_url}" in note for note in report.notes)


def test_a_two_gpu_job_submitted_over_rest_runs(local_slurm, monkeypatch, cleanup):
    backend = rest_backend(local_slurm, monkeypatch)
    name = unique("rest")
    cleanup[0].append(name)
    spec = sleep_spec(name, gpus_per_worker=2)
    result = backend.submit(spec)
    assert backend.submit(spec).reason == f"{result.reason.split(':')[0]} (already submitted)"
    running = wait_for(
        lambda: (s := backend.status([name])[name]).state in {BackendState.RUNNING, BackendState.SUCCEEDED} and s,
        "the job to run",
    )
    if running.state == BackendState.RUNNING:
        assert len(running.placements[0].gpu_indexes) == 2
    done = wait_for(lambda: (s := backend.status([name])[name]).state.finished and s, "the job to finish")
    assert done.state == BackendState.SUCCEEDED


def test_slurms_refusal_over_rest_is_permanent_with_its_message(local_slurm, monkeypatch):
    backend = rest_backend(local_slurm, monkeypatch)
    spec = sleep_spec(unique("nine"), gpus_per_worker=9)
    with pytest.raises(PermanentBackendError, match="Requested node configuration is not available"):
        backend.submit(spec)


def test_what_v0038_cannot_express_is_refused_not_dropped(local_slurm, monkeypatch):
    backend = rest_backend(local_slurm, monkeypatch)
    name = unique("pinned")
    script = f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --nodelist=gpu-01\ntrue\n"
    with pytest.raises(PermanentBackendError, match=r"cannot take #SBATCH --nodelist.*mode 'cli'"):
        backend.submit(WorkloadSpec(name=name, tenant="t", manifest=script))


def test_a_bad_token_or_an_unreachable_slurmrestd_fails_the_connection_test(local_slurm, monkeypatch):
    # slurmrestd answers a bad token exactly as a controller it cannot reach (HTTP 500 "Unspecified error"),
    # so reads fail retryably; the connection test says what went wrong.
    bad_token = rest_backend(local_slurm, monkeypatch, token="not-a-jwt")
    with pytest.raises(RetryableBackendError, match="Unspecified error"):
        bad_token.inventory()
    assert not bad_token.test_connection().ok
    unreachable = rest_backend(local_slurm, monkeypatch, restd_url="http://127.0.0.1:8719")
    with pytest.raises(RetryableBackendError, match="did not answer"):
        unreachable.inventory()
    assert "did not answer" in unreachable.test_connection().message


def test_exit_codes_over_rest_are_sacct_s_not_the_raw_wait_status(local_slurm, monkeypatch, cleanup):
    """slurmrestd's exit_code is the raw wait status (768 for `exit 3`) and slurmdb's reads 0 for it on 22.05."""
    from tests.backends.slurm.test_slurm_backend import exiting_script

    backend = rest_backend(local_slurm, monkeypatch)
    name = unique("rest-exit3")
    cleanup[0].append(name)
    backend.submit(WorkloadSpec(name=name, tenant="t", manifest=exiting_script(name, local_slurm.jobs_dir, "exit 3")))
    done = wait_for(lambda: (s := backend.status([name])[name]).state.finished and s, "the job to fail")
    assert done.state == BackendState.FAILED and done.reason.startswith("FAILED: exit code 3"), done.reason
    assert "768" not in done.reason
