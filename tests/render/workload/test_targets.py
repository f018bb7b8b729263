"""Deployment targets: the cluster settings that choose them (defaults keep what each cluster ran before), what the
KServe and Kubeflow Trainer renderers refuse or caveat, and strict validation against the pinned CRDs."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from apps.backends.render.errors import RenderError
from apps.backends.render.validate import validate_custom
from apps.backends.render.workload import WorkloadContext, kubernetes_context, render_kubernetes, validation_errors
from apps.backends.render.workload.context import RenderedWorkload, target_errors, targets
from apps.workloads.specs import apply_overrides, parse_spec
from tests.render.workload.cases import CATALOG, SERVE, TRAINING, kube_context, spec_of


def parsed(kind: str, data: dict, **overrides):
    return parse_spec(kind, apply_overrides(data, overrides), CATALOG)


CONTEXT = WorkloadContext(name="x", workload_id="1", queue="acme-train", tier="training", product_label="H100")


@pytest.mark.parametrize(
    ("connection", "expected"),
    [
        ({}, ("deployment", "kueue-job", "torch-distributed")),
        ({"queueing": "volcano"}, ("deployment", "volcano", "torch-distributed")),
        ({"inference_target": "kserve", "training_target": "trainjob"}, ("kserve", "trainjob", "torch-distributed")),
        ({"inference_target": "lws", "trainjob_runtime": "torch-nccl"}, ("lws", "kueue-job", "torch-nccl")),
    ],
)
def test_targets_default_to_what_the_cluster_ran_before(connection, expected):
    assert targets(connection) == expected
    ctx = kubernetes_context(CONTEXT, connection)
    assert (ctx.inference_target, ctx.training, ctx.trainjob_runtime) == expected


@pytest.mark.parametrize(
    ("connection", "message"),
    [
        ({"inference_target": "knative"}, "inference_target: 'knative' is not one of deployment, lws, kserve"),
        ({"training_target": "pytorchjob"}, "training_target: 'pytorchjob' is not one of kueue-job, volcano, trainjob"),
        ({"queueing": "volcano", "training_target": "trainjob"}, "no Volcano pod-group policy"),
        ({"queueing": "volcano", "training_target": "kueue-job"}, "does not work with queueing 'volcano'"),
        ({"training_target": "volcano"}, "a Volcano Job needs Volcano's scheduler and queues"),
        ({"trainjob_runtime": "Torch Distributed"}, "trainjob_runtime: 'Torch Distributed' is not a"),
    ],
)
def test_invalid_target_settings_are_named(connection, message):
    errors = target_errors(connection)
    assert len(errors) == 1 and message in errors[0]
    with pytest.raises(RenderError, match="connection"):
        kubernetes_context(CONTEXT, connection)


def test_kserve_refuses_a_replica_that_spans_nodes():
    spec = spec_of("vllm-tp8-pp2-lws.yaml")
    with pytest.raises(RenderError, match="inference_target lws can"):
        render_kubernetes(spec, kube_context("kueue+kserve", spec))


def test_trainjob_refuses_a_topology_it_cannot_express():
    spec = parsed("training", TRAINING, topology="leaf")
    with pytest.raises(RenderError, match="podSpecOverrides have no affinity"):
        render_kubernetes(spec, kube_context("kueue+trainjob", spec))


def test_an_elastic_trainjob_says_it_runs_fixed():
    spec = spec_of("training-elastic.yaml")
    rendered = render_kubernetes(spec, kube_context("kueue+trainjob", spec))
    trainer = rendered.objects[0]["spec"]["trainer"]
    assert trainer["numNodes"] == 6 and trainer["command"][:2] == ["torchrun", "--max-restarts=2"]
    assert {"name": "CHECKPOINT_PATH", "value": "/ckpt/elastic-7b"} in trainer["env"]
    assert any("Elastic 2..8 workers is not expressed" in c for c in rendered.caveats)
    assert validation_errors(rendered) == []


def test_fixed_replicas_and_autoscaling_bounds_become_kserves_own_fields():
    fixed = parsed("inference", SERVE, autoscaling=None, replicas=3)
    predictor = render_kubernetes(fixed, kube_context("kueue+kserve", fixed)).objects[0]["spec"]["predictor"]
    assert (predictor["minReplicas"], predictor["maxReplicas"]) == (3, 3) and "autoScaling" not in predictor
    scaled = spec_of("vllm-tp4-kserve.yaml")
    isvc = render_kubernetes(scaled, kube_context("kueue+kserve", scaled)).objects[0]
    assert (isvc["spec"]["predictor"]["minReplicas"], isvc["spec"]["predictor"]["maxReplicas"]) == (1, 6)
    assert isvc["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "keda"
    assert isvc["spec"]["predictor"]["labels"]["kueue.x-k8s.io/queue-name"] == "acme-serve"


def test_lws_target_puts_a_single_node_service_in_groups_of_one():
    spec = spec_of("sglang-dp2-lws.yaml")
    rendered = render_kubernetes(spec, kube_context("kueue+lws", spec))
    kinds = [o["kind"] for o in rendered.objects]
    assert kinds == ["LeaderWorkerSet", "Service", "PodDisruptionBudget"]
    template = rendered.objects[0]["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 1 and "leaderTemplate" not in template
    assert rendered.objects[1]["spec"]["selector"]["gpu-console/role"] == "leader"


def test_strict_validation_refuses_unknown_fields_of_the_new_kinds():
    for name in ("vllm-tp4-kserve.yaml", "training-4x8-h100-trainjob.yaml"):
        spec = spec_of(name)
        target = "kueue+kserve" if "kserve" in name else "kueue+trainjob"
        obj = copy.deepcopy(render_kubernetes(spec, kube_context(target, spec)).objects[0])
        body = obj["spec"]["predictor"] if obj["kind"] == "InferenceService" else obj["spec"]["trainer"]
        body["gpus"] = 8
        assert any("Additional properties are not allowed ('gpus'" in e for e in validate_custom(obj)), name
        assert validation_errors(RenderedWorkload([obj]))


def test_trainjob_managed_by_cel_rule_is_checked():
    spec = spec_of("training-4x8-h100-trainjob.yaml")
    obj = render_kubernetes(spec, kube_context("kueue+trainjob", spec)).objects[0]
    assert validate_custom(obj) == []
    bad = copy.deepcopy(obj)
    bad["spec"]["managedBy"] = "gpu-console"
    assert any("ManagedBy must be" in e for e in validate_custom(bad))
    # that every CEL rule of the TrainJob CRD is checked or waived: tests/render/test_validation.py


def test_a_hand_built_context_with_a_bad_target_is_refused():
    spec = spec_of("sglang-dp2.yaml")
    with pytest.raises(RenderError, match="inference_target"):
        render_kubernetes(spec, replace(kube_context("volcano", spec), inference_target="knative"))


@pytest.mark.parametrize(
    ("case", "field"), [("vllm-cache-aware.yaml", "routing"), ("sglang-pd.yaml", "disaggregation")]
)
def test_routing_and_pools_render_behind_the_router_on_lws_and_are_refused_by_kserve(case, field):
    """A routed service's engines are single-node Deployments behind its router whatever the Deployment/LWS target;
    the kserve target renders one InferenceService, so it refuses routing and pools by name."""
    spec = spec_of(case)
    on_lws = render_kubernetes(spec, kube_context("kueue+lws", spec))
    kinds = {o["kind"] for o in on_lws.objects}
    assert "LeaderWorkerSet" not in kinds and "Deployment" in kinds and validation_errors(on_lws) == []
    assert any(o["metadata"]["name"].endswith("-router") for o in on_lws.objects)
    with pytest.raises(RenderError, match="inference_target is kserve") as refused:
        render_kubernetes(spec, kube_context("kueue+kserve", spec))
    assert refused.value.field == field
