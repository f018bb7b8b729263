"""Golden files: representative workloads rendered for Kueue, Volcano and Slurm.

The expected renderings live in tests/render/workload/golden/. After an intended change to a renderer,
regenerate them and review the diff like code:

    UPDATE_GOLDEN=1 DATABASE_URL=postgres://postgres@127.0.0.1:5432/console_wl SECRET_KEY=x \\
        .venv/bin/python -m pytest tests/render/workload -q -p no:warnings

Pure tests: no database, no cluster. Every Kubernetes golden file validates strictly (built-ins on
Kubernetes 1.31-1.35, Volcano / LeaderWorkerSet / KEDA objects against the vendored CRDs).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from apps.backends.render.workload import render_kubernetes, render_slurm, validation_errors
from apps.backends.render.workload.context import RenderedWorkload
from tests.render.workload.cases import CASES, CONTEXTS, SLURM_TARGETS, kube_context, slurm_context, spec_of

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
KUBE = sorted(name for name, (_, _, target) in CASES.items() if target not in SLURM_TARGETS)


def rendered(name: str) -> str:
    """The text a golden file holds: YAML with caveats for Kubernetes, the sbatch script for Slurm."""
    _, _, target = CASES[name]
    spec = spec_of(name)
    extra = CONTEXTS.get(name, {})
    if target in SLURM_TARGETS:
        return render_slurm(spec, slurm_context(**SLURM_TARGETS[target], **extra)).script
    return render_kubernetes(spec, kube_context(target, spec, **extra)).to_yaml()


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} is missing; run with UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{name} differs from the golden file; if intended, rerun with UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendering_matches_golden_file(name):
    assert_golden(name, rendered(name))


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_input_gives_byte_identical_output(name):
    assert rendered(name) == rendered(name)


@pytest.mark.parametrize("name", KUBE)
def test_golden_objects_validate_strictly(name):
    objects = [doc for doc in yaml.safe_load_all((GOLDEN / name).read_text()) if doc]
    assert objects
    assert validation_errors(RenderedWorkload(objects)) == []


@pytest.mark.parametrize("name", KUBE)
def test_yaml_is_exactly_the_rendered_objects(name):
    """The YAML text (literal blocks for scripts included) loads back to the very objects rendered."""
    _, _, queueing = CASES[name]
    spec = spec_of(name)
    result = render_kubernetes(spec, kube_context(queueing, spec, **CONTEXTS.get(name, {})))
    assert list(yaml.safe_load_all(result.to_yaml())) == result.objects
    assert "&id" not in result.to_yaml()  # no YAML anchors: every object spells itself out


def test_golden_directory_has_no_stale_files():
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(CASES)
