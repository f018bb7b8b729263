"""Node pools' pre-pull lists as DaemonSets (apps/backends/render/prepull.py), pushed with the quota objects: strictly
valid on every supported Kubernetes version, one per pool with a node label, the pool's taints tolerated, an init
container per image and a pause container, refusals naming the pool and the image. Pure: no database."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apps.backends.render import RenderError, render_kubernetes
from apps.backends.render.desired import PrepullPool
from apps.backends.render.prepull import PAUSE_IMAGE, PREPULL_NAMESPACE, daemon_set_name
from apps.backends.render.validate import validate_objects
from tests.render.states import representative_state

SGLANG, VLLM = "lmsysorg/sglang:v0.5.3", "vllm/vllm-openai:v0.11.0"
SERVE = PrepullPool(
    "h100-serve",
    (SGLANG, VLLM),
    (("gpu-console/pool", "h100-serve"),),
    ({"key": "gpu-console/pool", "value": "serve", "effect": "NoSchedule"}, {"key": "nvidia.com/gpu", "value": ""}),
)


@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
def test_one_daemon_set_per_pool_after_the_quota_objects_strictly_valid(queueing):
    state = replace(representative_state(queueing), prepull=(SERVE, PrepullPool("empty", ())))
    rendered = render_kubernetes(state)
    assert validate_objects(rendered.objects) == []
    namespace, daemon = rendered.objects[-2:]  # after everything the quota renderers produce
    assert (namespace["kind"], namespace["metadata"]["name"]) == ("Namespace", PREPULL_NAMESPACE)
    assert (daemon["kind"], daemon["metadata"]["name"]) == ("DaemonSet", daemon_set_name("h100-serve"))
    pod = daemon["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpu-console/pool": "h100-serve"}
    assert pod["tolerations"] == [
        {"key": "gpu-console/pool", "operator": "Equal", "value": "serve", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists"},
    ]
    assert [(c["image"], c["command"], c["imagePullPolicy"]) for c in pod["initContainers"]] == [
        (SGLANG, ["sh", "-c", "true"], "IfNotPresent"),
        (VLLM, ["sh", "-c", "true"], "IfNotPresent"),
    ]
    assert [c["image"] for c in pod["containers"]] == [PAUSE_IMAGE]
    assert sum(o["kind"] == "DaemonSet" for o in rendered.objects) == 1  # a pool without images has none
    assert any("needs a shell" in caveat for caveat in rendered.caveats)


def test_without_pre_pulls_the_push_is_what_it_was():
    state = representative_state("kueue")
    empty = replace(state, prepull=(PrepullPool("p", ()),))
    assert render_kubernetes(empty).objects == render_kubernetes(state).objects


def test_a_bad_image_or_pool_name_is_refused_naming_it():
    state = representative_state("kueue")
    with pytest.raises(RenderError) as refused:
        render_kubernetes(replace(state, prepull=(replace(SERVE, images=(SGLANG, "no tag")),)))
    assert refused.value.field == "pool h100-serve: prepull_images[1]"
    with pytest.raises(RenderError) as refused:
        render_kubernetes(replace(state, prepull=(replace(SERVE, name="Bad_Pool"),)))
    assert refused.value.field == "pool Bad_Pool: name"


def test_a_long_pool_name_still_names_a_valid_daemon_set():
    name = daemon_set_name("p" * 63)
    assert len(name) <= 63 and name != daemon_set_name("p" * 62 + "q")
