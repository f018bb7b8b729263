"""`pip install ./cli` on its own: a CI image that has only a Python gets gpuc and its two dependencies, and gpuc
works against the live console without the console's code or packages anywhere.

The virtual environment is made without pip (`python -m venv --without-pip`: ensurepip alone takes half a minute
on this machine) and this run's pip installs into it with `--python`: a real install from the package sources pip
is configured with on this machine (the package registry, and the local mirror of it where the machine has one),
dependencies resolved from cli/pyproject.toml and nothing borrowed from this test run's environment: no
PYTHONPATH, no --no-deps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from apps.workloads.models import Workload
from tests.cli.conftest import CLI_DIR, write_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def run(command: list, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def test_pip_install_cli_alone_gives_a_gpuc_that_works_against_the_console(gpuc, console, tmp_path):
    venv = tmp_path / "ci-image"
    made = run([sys.executable, "-m", "venv", "--without-pip", str(venv)], {"PATH": os.environ["PATH"]})
    assert made.returncode == 0, made.stderr
    python, command = venv / "bin" / "python", venv / "bin" / "gpuc"
    # pip's own configuration (indexes, certificates) comes from the machine; nothing of this run's Python paths.
    pip_env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k in ("PATH", "HOME")}
    installed = run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", str(CLI_DIR)],
                    pip_env)  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr

    # Alone: what the venv holds is gpuc and what it declares, not the console's packages.
    names = "import importlib.metadata as m, json; print(json.dumps([d.name.lower() for d in m.distributions()]))"
    listed = run([str(python), "-c", names], {"PATH": os.environ["PATH"]})
    packages = set(json.loads(listed.stdout))
    assert {"gpuc", "httpx", "pyyaml"} <= packages and not {"django", "celery", "djangorestframework"} & packages, (
        packages
    )

    env = gpuc.env(PYTHONPATH=None)  # the console URL and token, a home of its own, and the venv's gpuc alone
    version = run([str(command), "--version"], env)
    assert (version.returncode, version.stdout.strip()) == (0, "gpuc 0.1.0"), version
    submitted = run([str(command), "submit", "-f", str(write_job(gpuc.home, "from-the-image"))], env)
    assert submitted.returncode == 0, submitted
    listing = run([str(command), "ls", "-o", "json"], env)
    assert listing.returncode == 0, listing
    workload = Workload.objects.get(name="from-the-image")
    assert [(w["id"], w["name"]) for w in json.loads(listing.stdout)] == [(workload.pk, "from-the-image")], listing
