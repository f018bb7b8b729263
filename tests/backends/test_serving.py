"""The simulated inference engines' /metrics: real names, deterministic, monotonic, shaped by load and replicas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apps.backends.simulator import serving
from apps.backends.simulator.serving import ServiceProfile, render_service_metrics
from apps.backends.types import (
    ENGINE_LABEL,
    KIND_LABEL,
    MAX_REPLICAS_LABEL,
    MIN_REPLICAS_LABEL,
    WAITING_THRESHOLD_LABEL,
)
from apps.inference.parsing import parse_engine_metrics
from apps.inference.quantiles import histogram_quantile, series_delta
from tests.backends.helpers import make_cluster, spec

START = datetime(2025, 5, 1, 6, 0, tzinfo=UTC)
FIXED = ServiceProfile("wl1-chat", "vllm", "meta-llama/Llama-3.1-8B-Instruct", 42, START, replicas=2)
SCALED = ServiceProfile(
    "wl2-chat", "sglang", "meta-llama/Llama-3.1-8B-Instruct", 42, START, 1, 1, 4, waiting_threshold=5
)


def _families(text: str) -> dict[str, object]:
    return {family.name: family for family in text_string_to_metric_families(text)}


@pytest.mark.parametrize(
    ("profile", "names"),
    [
        (
            FIXED,
            {
                "vllm:num_requests_running": "gauge",
                "vllm:num_requests_waiting": "gauge",
                "vllm:kv_cache_usage_perc": "gauge",
                "vllm:time_to_first_token_seconds": "histogram",
                "vllm:inter_token_latency_seconds": "histogram",
                "vllm:e2e_request_latency_seconds": "histogram",
                "vllm:prompt_tokens": "counter",  # the parser names counter families without _total
                "vllm:generation_tokens": "counter",
            },
        ),
        (
            SCALED,
            {
                "sglang:num_running_reqs": "gauge",
                "sglang:num_queue_reqs": "gauge",
                "sglang:token_usage": "gauge",
                "sglang:time_to_first_token_seconds": "histogram",
                "sglang:inter_token_latency_seconds": "histogram",
                "sglang:e2e_request_latency_seconds": "histogram",
                "sglang:gen_throughput": "gauge",
                "sglang:prompt_tokens": "counter",
                "sglang:generation_tokens": "counter",
            },
        ),
    ],
)
def test_engines_real_names_types_and_labels(profile, names):
    families = _families(render_service_metrics(profile, START + timedelta(hours=3)).text)
    assert {name: family.type for name, family in families.items()} == names
    sample = families[next(iter(names))].samples[0]
    assert sample.labels["model_name"] == "meta-llama/Llama-3.1-8B-Instruct" and sample.labels["pod"]
    assert ("engine" in sample.labels) == (profile.engine == "vllm")  # vLLM V1 labels its engine core


def test_same_instant_same_text_in_any_process():
    at = START + timedelta(hours=5, seconds=20)
    warm = render_service_metrics(SCALED, at).text
    serving._cache.clear()  # another process: computed from the service's start
    assert render_service_metrics(SCALED, at).text == warm


def test_counters_only_grow_and_buckets_grow_with_le():
    previous: dict[tuple, float] = {}
    for step in range(0, 3 * 60 * 4, 11):  # every 165 s over three hours
        text = render_service_metrics(FIXED, START + timedelta(seconds=15 * step)).text
        for family in text_string_to_metric_families(text):
            if family.type not in ("counter", "histogram"):
                continue
            by_series: dict[str, list[float]] = {}
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                assert sample.value >= previous.get(key, 0.0), key
                previous[key] = sample.value
                if sample.name.endswith("_bucket"):
                    by_series.setdefault(sample.labels["pod"], []).append(sample.value)
            for counts in by_series.values():
                assert counts == sorted(counts)


def _minutes(profile: ServiceProfile, hours: int, every: int = 3):
    """(snapshot, TTFT p50 over the last `every` minutes) through `hours` of simulated time."""
    before = None
    for minute in range(0, hours * 60, every):
        snapshot = render_service_metrics(profile, START + timedelta(minutes=minute))
        histogram = parse_engine_metrics(snapshot.text, profile.engine).histograms["ttft"]
        if before is not None:
            summed = [0.0] * len(histogram.bounds)
            for key, values in histogram.series.items():
                for i, value in enumerate(series_delta(values, before.get(key))):
                    summed[i] += value
            yield snapshot, histogram_quantile(0.5, list(zip(histogram.bounds, summed, strict=True)))
        before = histogram.series


def test_ttft_rises_when_requests_wait():
    quiet, queued = [], []
    for snapshot, p50 in _minutes(FIXED, 24, every=5):
        if p50 is None:
            continue
        if snapshot.waiting == 0:
            quiet.append(p50)
        elif snapshot.waiting > 50:
            queued.append(p50)
    assert quiet and queued, "a day of load has both quiet minutes and queues"
    assert sum(queued) / len(queued) > 2 * sum(quiet) / len(quiet)


def test_replicas_follow_the_waiting_queue_within_min_and_max():
    seen = [(s.replicas, s.starting, s.waiting) for s, _ in _minutes(SCALED, 12, every=2)]
    assert all(1 <= replicas <= 4 for replicas, _, _ in seen)
    assert max(r for r, _, _ in seen) == 4 and min(r for r, _, _ in seen) == 1
    # Scale-out follows a queue past the threshold: replicas start loading while requests wait.
    assert any(starting and waiting > SCALED.waiting_threshold for _, starting, waiting in seen)
    fixed = {s.replicas for s, _ in _minutes(FIXED, 6, every=10)}
    assert fixed == {2}


@pytest.mark.django_db
def test_served_over_http_for_running_inference_only(client):
    _, backend = make_cluster("web", nodes=1, seed=4)
    labels = {
        KIND_LABEL: "inference",
        ENGINE_LABEL: "sglang",
        MIN_REPLICAS_LABEL: "1",
        MAX_REPLICAS_LABEL: "3",
        WAITING_THRESHOLD_LABEL: "5",
    }
    command = ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-7B-Instruct", "--port", "8000"]
    backend.submit(spec("svc", outcome=None, labels=labels, command=command, duration_s=3600))
    backend.submit(spec("job", gpus_per_worker=1))
    backend.advance(600)  # past the replica's cold start (coldstart.py): its engine serves from then on
    url = "/simulator/web/services/{}/metrics"
    response = client.get(url.format("svc"))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain; version=0.0.4")
    families = _families(response.content.decode())
    assert families["sglang:num_queue_reqs"].samples[0].labels["model_name"] == "Qwen/Qwen2.5-7B-Instruct"
    assert client.get(url.format("job")).status_code == 404  # a training job has no engine
    assert client.get(url.format("nope")).status_code == 404
    assert client.get("/simulator/nowhere/services/svc/metrics").status_code == 404
    backend.cancel("svc")
    stopped = client.get(url.format("svc"))
    assert stopped.status_code == 503 and b"not serving" in stopped.content
