"""containers: "pyxis" on the real local Slurm cluster, both ways: where the pyxis SPANK plugin is loaded and where
it is not.

The console renders a spec's image as options of the script's srun line (`--container-image`, `--container-mounts`:
apps/backends/render/workload/containers.py). Those options exist only where plugstack.conf loads pyxis. sbatch does
not read a script's srun lines, so `sbatch --test-only` accepts the script either way; what tells the two apart is
the job itself: its srun refuses the options without the plugin, and passes them to each task with it.

Pyxis itself needs enroot and a container runtime, which this machine lacks: the plugin loaded here is a stand-in
(tests/slurm_spank/pyxis_stub.c), built with gcc against Slurm's spank.h at the start of this module. It registers
the same options in the same places (srun, sbatch/salloc, slurmstepd) and runs no container: each task finds the
image and mounts srun passed on in PYXIS_STUB_IMAGE and PYXIS_STUB_MOUNTS. The local cluster's plugin stack is
empty (scripts/slurm-local.sh: PlugStackConfig includes plugstack.conf.d/*.conf); `pyxis_loaded` puts the stand-in
there for one test and takes it out again, so every other Slurm test sees a cluster without pyxis (the Slurm tests
share the one cluster and never run side by side: flock /tmp/slurm.lock, one pytest process).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from apps.backends.render.spec import Volume
from apps.backends.slurm.backend import SlurmBackend
from apps.backends.slurm.script import sbatch_script
from apps.backends.types import BackendState
from apps.fleet.models import Cluster
from tests.backends.slurm.conftest import connection, sleep_spec, unique, wait_for

STUB = Path(__file__).resolve().parents[2] / "slurm_spank" / "pyxis_stub.c"
SPANK_H = Path("/usr/include/slurm/spank.h")
IMAGE = "nvcr.io/nvidia/pytorch:24.08-py3"
ENROOT_IMAGE = "nvcr.io#nvidia/pytorch:24.08-py3"  # the same image as pyxis/enroot names it
DONE = {BackendState.SUCCEEDED, BackendState.FAILED, BackendState.CANCELLED}


@pytest.fixture(scope="module")
def pyxis_stub(tmp_path_factory) -> Path:
    """The stand-in plugin, compiled for this run."""
    if not SPANK_H.exists():
        pytest.fail(f"{SPANK_H} is missing: scripts/slurm-local.sh start installs libslurm-dev", pytrace=False)
    built = tmp_path_factory.mktemp("spank") / "pyxis_stub.so"
    gcc = subprocess.run(["gcc", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-o", str(built), str(STUB)],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert gcc.returncode == 0, gcc.stderr
    return built


@pytest.fixture
def pyxis_loaded(local_slurm, pyxis_stub):
    """The stand-in in the local cluster's plugin stack for this test only."""
    stack = Path(local_slurm.conf).parent / "plugstack.conf.d"
    if "PlugStackConfig=" not in Path(local_slurm.conf).read_text() or not stack.is_dir():
        pytest.fail(
            "the running local Slurm cluster has no plugin stack of its own: it was started by an older "
            "scripts/slurm-local.sh; restart it (scripts/slurm-local.sh stop, then start)",
            pytrace=False,
        )
    enabled = stack / "pyxis-stub.conf"
    enabled.write_text(f"required {pyxis_stub}\n")
    try:
        yield
    finally:
        enabled.unlink(missing_ok=True)


def pyxis_backend(local_slurm) -> SlurmBackend:
    conn = connection(local_slurm, containers="pyxis", volume_dirs={"datasets": local_slurm.jobs_dir})
    return SlurmBackend(Cluster(name="gpuc", kind="slurm", connection=conn))


def image_spec(name: str):
    """A training job in an image, with a dataset mounted read-only, printing what its task was given."""
    spec = sleep_spec(name, image=IMAGE)
    spec.source = replace(
        spec.source,
        command=["sh", "-c", 'echo "image=$PYXIS_STUB_IMAGE mounts=$PYXIS_STUB_MOUNTS"'],
        volumes=[Volume(claim="datasets", mount_path="/data", read_only=True)],
    )
    return spec


def sbatch_test_only(local_slurm, script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sbatch", "--test-only"], input=script, capture_output=True, text=True, timeout=60,
                          env=local_slurm.env(), cwd=local_slurm.jobs_dir)  # fmt: skip


def run_to_the_end(backend: SlurmBackend, local_slurm, spec, cleanup) -> tuple[BackendState, str]:
    cleanup[0].append(spec.name)
    submitted = backend.submit(spec)
    job = re.fullmatch(r"Slurm job (\d+)", submitted.reason).group(1)
    done = wait_for(lambda: (s := backend.status([spec.name])[spec.name]).state in DONE and s, f"{spec.name} to end")
    output = Path(local_slurm.jobs_dir) / f"{spec.name}-{job}.out"
    return done.state, wait_for(lambda: output.exists() and output.read_text(), f"{output} to be written")


def test_where_pyxis_is_loaded_the_rendered_script_is_accepted_and_its_tasks_get_the_image(
    local_slurm, pyxis_loaded, cleanup
):
    backend = pyxis_backend(local_slurm)
    report = backend.test_connection()
    assert report.features["pyxis"] is True, report.message
    spec = image_spec(unique("pyxis"))
    script = sbatch_script(spec, backend.settings)
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    assert f"'--container-image={ENROOT_IMAGE}'" in srun, srun
    assert f" --container-mounts={local_slurm.jobs_dir}:/data:ro " in srun, srun
    checked = sbatch_test_only(local_slurm, script)
    assert checked.returncode == 0 and re.search(r"sbatch: Job \d+ to start at ", checked.stderr), checked.stderr

    state, output = run_to_the_end(backend, local_slurm, spec, cleanup)
    assert state == BackendState.SUCCEEDED, output
    assert f"image={ENROOT_IMAGE} mounts={local_slurm.jobs_dir}:/data:ro" in output.splitlines()


def test_without_pyxis_the_same_script_passes_test_only_but_its_srun_refuses_the_options(local_slurm, cleanup):
    backend = pyxis_backend(local_slurm)
    assert backend.test_connection().features["pyxis"] is False
    spec = image_spec(unique("no-pyxis"))
    script = sbatch_script(spec, backend.settings)
    checked = sbatch_test_only(local_slurm, script)
    assert checked.returncode == 0, checked.stderr  # sbatch cannot tell: it does not read the srun lines

    state, output = run_to_the_end(backend, local_slurm, spec, cleanup)
    assert state == BackendState.FAILED
    assert f"srun: unrecognized option '--container-image={ENROOT_IMAGE}'" in output, output
    assert not [line for line in output.splitlines() if line.startswith("image=")], output  # the task never ran
