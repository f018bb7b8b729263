"""The package's entry points: render(state, kind) and caveats_for(kind, queueing)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apps.backends.render import KINDS, RenderError, RenderResult, SlurmRender, caveats_for, render
from tests.render.states import representative_state


def test_render_dispatches_on_kind():
    assert isinstance(render(representative_state("kueue"), "kubernetes"), RenderResult)
    assert isinstance(render(representative_state(), "slurm"), SlurmRender)
    assert KINDS == ("kubernetes", "slurm")


def test_render_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="'lsf' is not one of 'kubernetes', 'slurm'"):
        render(representative_state(), "lsf")


def test_slurm_ignores_the_kubernetes_queueing_setting():
    state = representative_state()
    assert render(replace(state, queueing="volcano"), "slurm") == render(state, "slurm")


@pytest.mark.parametrize(("kind", "queueing"), [("kubernetes", "kueue"), ("kubernetes", "volcano"), ("slurm", "kueue")])
def test_caveats_for_are_the_fixed_part_of_the_rendered_caveats(kind, queueing):
    """The cluster page shows caveats_for() without rendering; a rendering adds state-specific ones after."""
    fixed = caveats_for(kind, queueing)
    assert fixed
    rendered = render(representative_state(queueing), kind).caveats
    assert rendered[: len(fixed)] == fixed
    assert caveats_for(kind, queueing) is not caveats_for(kind, queueing)  # callers may append safely


def test_caveats_for_rejects_unknown_values():
    with pytest.raises(ValueError, match="kind"):
        caveats_for("lsf")
    with pytest.raises(ValueError, match="queueing"):
        caveats_for("kubernetes", "yunikorn")


def test_render_error_carries_field_and_reason():
    state = representative_state()
    state = replace(state, queueing="yunikorn")
    with pytest.raises(RenderError) as exc:
        render(state, "kubernetes")
    assert exc.value.field == "queueing"
    assert "not one of" in exc.value.reason
    assert isinstance(exc.value, ValueError)
