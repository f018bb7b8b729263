"""Warm weights rendered (apps/backends/render/workload/warm.py): the Job after the service's own objects (the
backend follows the first workload object), the wait for its marker in every engine pod of every target, and Slurm's
refusal naming the field. Pure: no database, no cluster."""

from __future__ import annotations

import pytest

from apps.backends.render.errors import RenderError
from apps.backends.render.workload import render_kubernetes, render_slurm, validation_errors
from apps.backends.render.workload.warm import WARM_MOUNT, marker
from apps.workloads.specs import apply_overrides, parse_spec
from tests.render.workload.cases import CATALOG, SERVE, SGLANG, kube_context, slurm_context

WARM = {"weights": None, "warm": {"claim": "hf-cache"}}
PD = {"prefill": {"replicas": 1}, "decode": {"replicas": 2}}


def _spec(base: dict, **overrides):
    return parse_spec("inference", apply_overrides(base, {**WARM, **overrides}), CATALOG)


def _pods(objects: list[dict]) -> list[dict]:
    """Every pod template of the rendering's engines (Deployment, LeaderWorkerSet groups, KServe predictor)."""
    out = []
    for obj in objects:
        spec = obj.get("spec") or {}
        if obj["kind"] == "Deployment" and obj["metadata"]["name"].endswith("-router"):
            continue
        if obj["kind"] == "Deployment":
            out.append(spec["template"]["spec"])
        elif obj["kind"] == "LeaderWorkerSet":
            lwt = spec["leaderWorkerTemplate"]
            out += [t["spec"] for t in (lwt.get("leaderTemplate"), lwt["workerTemplate"]) if t]
        elif obj["kind"] == "InferenceService":
            out.append(spec["predictor"])
    return out


@pytest.mark.parametrize(
    ("base", "overrides", "target"),
    [
        (SERVE, {}, "kueue"),
        (SERVE, {"tensor_parallel": 8, "pipeline_parallel": 2, "autoscaling": None}, "kueue"),  # multi-node LWS
        (SGLANG, {"routing": "cache-aware", "data_parallel": 1}, "volcano"),  # behind the router
        (SGLANG, {"data_parallel": 1, "disaggregation": PD}, "kueue"),
        (SGLANG, {}, "kueue+kserve"),
        (SGLANG, {}, "volcano+lws"),
    ],
)
def test_every_engine_pod_waits_for_the_marker_and_the_job_comes_last(base, overrides, target):
    spec = _spec(base, **overrides)
    rendered = render_kubernetes(spec, kube_context(target, spec))
    assert validation_errors(rendered) == []
    kinds = [obj["kind"] for obj in rendered.objects]
    job = rendered.objects[-1]
    assert (job["kind"], job["metadata"]["name"]) == ("Job", f"{spec.name}-warm") and kinds.count("Job") == 1
    pods = _pods(rendered.objects)
    assert pods
    for pod in pods:
        (wait,) = pod["initContainers"]
        assert {"name": "GPU_CONSOLE_WARM_MARKER", "value": marker(spec)} in wait["env"]
        assert {"name": "warm-weights", "persistentVolumeClaim": {"claimName": "hf-cache", "readOnly": True}} in pod[
            "volumes"
        ]
        engine = pod["containers"][0]
        assert {"name": "warm-weights", "mountPath": WARM_MOUNT, "readOnly": True} in engine["volumeMounts"]
        env = {e["name"]: e.get("value") for e in engine.get("env") or []}
        assert (env["HF_HOME"], env["HF_HUB_OFFLINE"]) == (WARM_MOUNT, "1")
    download = job["spec"]["template"]["spec"]
    assert download["volumes"][0]["persistentVolumeClaim"] == {"claimName": "hf-cache"}  # written: read-write
    assert "nodeSelector" not in download and "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]
    assert any("Warm weights: the Job" in caveat for caveat in rendered.caveats)


def test_the_marker_is_per_model():
    one, other = _spec(SERVE), _spec(SERVE, model="meta-llama/Llama-3.1-8B-Instruct")
    assert marker(one) != marker(other) and marker(one).endswith("models--meta-llama--Llama-3.1-70B-Instruct.complete")


def test_slurm_refuses_warm_weights_naming_the_field():
    spec = _spec(SERVE, autoscaling=None)
    with pytest.raises(RenderError) as refused:
        render_slurm(spec, slurm_context())
    assert refused.value.field == "warm" and "Kubernetes only" in str(refused.value)
