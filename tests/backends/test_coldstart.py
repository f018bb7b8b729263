"""The simulator's cold starts (apps/backends/simulator/coldstart.py): an inference replica pulls its image unless
its pool pre-pulls it, downloads or takes its weights from the warm cache, starts its engine; the status reports it,
the engines' telemetry serves only from then on, and the demo's two services start as the README says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.backends.render.desired import DesiredState, PrepullPool
from apps.backends.render.spec import DEFAULT_IMAGES, InferenceServiceSpec, Warm
from apps.backends.simulator import coldstart
from apps.backends.simulator.exporter import scrape_service
from apps.backends.types import BackendState
from apps.workloads.specs.convert import to_backend_spec
from tests.backends.helpers import make_cluster

VLLM, SGLANG = DEFAULT_IMAGES["vllm"], DEFAULT_IMAGES["sglang"]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_parts_of_a_cold_start_come_from_the_image_and_the_models_size():
    assert coldstart.weights_gb("meta-llama/Llama-3.1-70B-Instruct") == 140
    assert coldstart.weights_gb("mistralai/Mixtral-8x7B-Instruct-v0.1") == 112
    assert coldstart.weights_gb("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8") == 70
    assert coldstart.weights_gb("Qwen/Qwen2.5-7B-Instruct") == 14  # "2.5" is a version, not a size
    assert coldstart.image_gb(SGLANG) > coldstart.image_gb("nvcr.io/nvidia/pytorch:24.08-py3") == 8
    cold = coldstart.cold_start(image=VLLM, model="x/Llama-70B", scheduled=T0, prepulled_at=None, warm_since=None)
    assert cold.pull_s == coldstart.pull_s(VLLM) and cold.start_s == coldstart.ENGINE_START_S
    assert cold.weights_s == coldstart.download_s("x/Llama-70B") + coldstart.load_s("x/Llama-70B")


def test_a_pre_pull_still_going_leaves_its_rest_and_warm_weights_wait_for_the_job_once():
    done_soon = T0 + timedelta(seconds=30)
    partly = coldstart.cold_start(image=VLLM, model="x/m-8B", scheduled=T0, prepulled_at=done_soon, warm_since=None)
    assert partly.pull_s == 30
    model = "x/Llama-70B"
    first = coldstart.cold_start(image=VLLM, model=model, scheduled=T0, prepulled_at=T0, warm_since=T0)
    assert first.weights_s == coldstart.download_s(model) + coldstart.load_s(model)  # waits for the Job
    later = T0 + timedelta(hours=1)
    again = coldstart.cold_start(image=VLLM, model=model, scheduled=later, prepulled_at=T0, warm_since=T0)
    assert again.weights_s == coldstart.load_s(model)  # the cache is full: load only
    assert again.total_s < first.total_s


def _serve(name: str, engine: str, model: str, tp: int = 1, warm: Warm | None = None):
    spec = InferenceServiceSpec(
        name=name,
        tenant="team-a",
        queue="serve",
        model=model,
        gpu_model="h100",
        engine=engine,
        image=DEFAULT_IMAGES[engine],
        tensor_parallel=tp,
        warm=warm,
    )
    return to_backend_spec(spec, priority=1000)


def _prepull(cluster, pools: dict[str, list[str]]) -> DesiredState:
    prepull = tuple(PrepullPool(name, tuple(images)) for name, images in pools.items())
    return DesiredState(cluster=cluster.name, tenants=(), queues=(), tiers=(), gpu_models=(), prepull=prepull)


@pytest.mark.django_db
def test_the_demos_services_one_pre_pulled_one_cold():
    """README / docs/inference.md: llm-serve-70b (vLLM, 70B, no pre-pull) starts in 600+ s, chat-8b (SGLang, 8B, its
    image pre-pulled on the H100 pool) in under 120 s."""
    cluster, backend = make_cluster("warm", nodes=2, models={"h100": 1.0})
    pushed = backend.push_quota(_prepull(cluster, {"h100-training": [SGLANG]}))
    assert "1 pools pre-pull 1 images (1 pools changed)" in pushed.messages
    backend.advance(coldstart.pull_s(SGLANG))  # the nodes have pulled it
    backend.submit(_serve("llm-serve-70b", "vllm", "meta-llama/Llama-3.1-70B-Instruct", tp=4))
    backend.submit(_serve("chat-8b", "sglang", "meta-llama/Llama-3.1-8B-Instruct"))
    statuses = backend.status(["llm-serve-70b", "chat-8b"])
    assert {s.state for s in statuses.values()} == {BackendState.RUNNING}
    assert [s.ready_at for s in statuses["llm-serve-70b"].replica_starts] == [None]  # still starting
    backend.advance(120)
    (chat,) = backend.status(["chat-8b"])["chat-8b"].replica_starts
    assert 0 < (chat.ready_at - chat.scheduled_at).total_seconds() < 120
    assert backend.status(["llm-serve-70b"])["llm-serve-70b"].replica_starts[0].ready_at is None
    backend.advance(600)
    (big,) = backend.status(["llm-serve-70b"])["llm-serve-70b"].replica_starts
    assert (big.ready_at - big.scheduled_at).total_seconds() > 600
    # Pushing the same list again keeps the time the nodes had the image.
    assert backend.push_quota(_prepull(cluster, {"h100-training": [SGLANG]})).applied == 0


@pytest.mark.django_db
def test_the_engines_serve_only_once_the_replica_is_ready():
    cluster, backend = make_cluster("tele", nodes=1, models={"h100": 1.0})
    backend.submit(_serve("cold-svc", "vllm", "meta-llama/Llama-3.1-70B-Instruct", tp=4))
    backend.advance(300)  # pulling, downloading
    assert "vllm:num_requests_running{" not in scrape_service(cluster.name, "cold-svc").body
    backend.advance(600)
    assert "vllm:num_requests_running{" in scrape_service(cluster.name, "cold-svc").body


@pytest.mark.django_db
def test_warm_weights_are_downloaded_once_and_a_restarted_replica_loads_them_from_the_cache():
    _cluster, backend = make_cluster("cache", nodes=2, models={"h100": 1.0})
    model = "meta-llama/Llama-3.1-70B-Instruct"
    backend.submit(_serve("w1", "vllm", model, tp=8, warm=Warm("hf-cache")))
    backend.advance(3600)
    (first,) = backend.status(["w1"])["w1"].replica_starts
    # The first replica waits for the Job's download (longer than its image pull), then loads from the cache.
    expected = coldstart.download_s(model) + coldstart.load_s(model) + coldstart.ENGINE_START_S
    assert (first.ready_at - first.scheduled_at).total_seconds() == expected
    backend.drain(first.node, "maintenance")  # requeued: it starts again on the other node
    backend.advance(3600)
    (again,) = backend.status(["w1"])["w1"].replica_starts
    assert again.node != first.node and again.replica != first.replica
    expected = coldstart.pull_s(VLLM) + coldstart.load_s(model) + coldstart.ENGINE_START_S  # no download again
    assert (again.ready_at - again.scheduled_at).total_seconds() == expected
