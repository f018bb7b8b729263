"""Golden-file tests: the representative state rendered for Kueue, Volcano and Slurm.

The expected renderings live in tests/render/golden/. After an intended change to a renderer,
regenerate them and review the diff like code:

    UPDATE_GOLDEN=1 DATABASE_URL=... SECRET_KEY=x .venv/bin/python -m pytest tests/render -q

Pure tests: no database, no cluster.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apps.backends.render import render
from apps.backends.render.validate import validate_objects
from tests.render.states import representative_state, reversed_state

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def rendered(target: str, state=None) -> str:
    """The text a golden file holds: YAML with caveats for Kubernetes, the preview script for Slurm."""
    if target == "slurm":
        return render(state or representative_state(), "slurm").as_script()
    return render(state or representative_state(queueing=target), "kubernetes").to_yaml()


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} is missing; run with UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{name} differs from the golden file; if intended, rerun with UPDATE_GOLDEN=1"


@pytest.mark.parametrize(
    ("target", "name"), [("kueue", "kueue.yaml"), ("volcano", "volcano.yaml"), ("slurm", "slurm.sh")]
)
def test_rendering_matches_golden_file(target, name):
    assert_golden(name, rendered(target))


@pytest.mark.parametrize("target", ["kueue", "volcano", "slurm"])
def test_same_input_gives_byte_identical_output(target):
    assert rendered(target) == rendered(target)


@pytest.mark.parametrize("target", ["kueue", "volcano", "slurm"])
def test_output_does_not_depend_on_input_order(target):
    # The database may return tenants, queues, quota lines, namespaces and users in any order.
    state = representative_state(queueing="kueue" if target == "slurm" else target)
    assert rendered(target, reversed_state(state)) == rendered(target, state)


@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
def test_golden_objects_validate_strictly(queueing):
    """Every golden object: built-ins on Kubernetes 1.31-1.35, custom objects against the CRDs and rules."""
    import yaml

    objects = [doc for doc in yaml.safe_load_all((GOLDEN / f"{queueing}.yaml").read_text()) if doc]
    assert objects
    assert validate_objects(objects) == []
