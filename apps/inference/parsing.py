"""Reading an inference engine's /metrics text with prometheus_client's parser: the series the console keeps.

Names are the engines' own (see apps/backends/simulator/serving.py for the sources): vLLM V1 and SGLang.
The inter-token latency histogram has an older name in each engine, read when the current one is absent.

Per series (label set without `le`), the result keeps gauges, counters and histogram buckets; the scrape
turns them into deltas. A histogram whose buckets are missing or garbled (no +Inf bucket, an unreadable
`le`, counts that go down as `le` grows, a `_count` that disagrees with +Inf, series with different bounds)
is dropped whole and named in `errors`; the rest of the scrape is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import pairwise

from prometheus_client.parser import text_string_to_metric_families

from apps.backends.render.workload.engines import RUNNING_METRIC, WAITING_METRIC


@dataclass(frozen=True)
class EngineNames:
    running: str
    waiting: str
    kv_cache: str
    prompt_tokens: str
    generation_tokens: str
    ttft: tuple[str, ...]  # histogram names, preferred first
    tpot: tuple[str, ...]
    gen_throughput: str | None = None


ENGINE_NAMES = {
    "vllm": EngineNames(
        running=RUNNING_METRIC["vllm"],
        waiting=WAITING_METRIC["vllm"],
        kv_cache="vllm:kv_cache_usage_perc",
        prompt_tokens="vllm:prompt_tokens_total",
        generation_tokens="vllm:generation_tokens_total",
        ttft=("vllm:time_to_first_token_seconds",),
        tpot=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    ),
    "sglang": EngineNames(
        running=RUNNING_METRIC["sglang"],
        waiting=WAITING_METRIC["sglang"],
        kv_cache="sglang:token_usage",
        prompt_tokens="sglang:prompt_tokens_total",
        generation_tokens="sglang:generation_tokens_total",
        ttft=("sglang:time_to_first_token_seconds",),
        tpot=("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        gen_throughput="sglang:gen_throughput",
    ),
}
REPLICA_LABEL = "pod"  # added by a scrape of the pods (Prometheus, a federation); absent from a bare engine


class ExpositionError(ValueError):
    """The text is not Prometheus exposition format."""


@dataclass(frozen=True)
class Histogram:
    """Cumulative bucket counts per series, all series on the same bounds (the last +Inf)."""

    name: str
    bounds: tuple[float, ...]
    series: dict[str, list[float]]


@dataclass
class EngineScrape:
    running: float | None = None
    waiting: float | None = None
    kv_cache: float | None = None  # mean over series, 0..1
    gen_throughput: float | None = None
    replicas: int | None = None
    counters: dict[str, dict[str, float]] = field(default_factory=dict)  # "prompt"/"generation" -> series -> value
    histograms: dict[str, Histogram] = field(default_factory=dict)  # "ttft"/"tpot"
    errors: list[str] = field(default_factory=list)


def _key(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "le")


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    by_name: dict[str, list[tuple[dict[str, str], float]]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                by_name.setdefault(sample.name, []).append((sample.labels, float(sample.value)))
    except (ValueError, TypeError, IndexError) as exc:
        raise ExpositionError(f"unreadable exposition text: {exc}") from exc
    return by_name


def _histogram(name: str, samples: dict) -> Histogram | str | None:
    """The histogram `name`, None when absent, or why its buckets are unusable."""
    rows = samples.get(f"{name}_bucket")
    if not rows:
        return None
    per_series: dict[str, dict[float, float]] = {}
    for labels, value in rows:
        raw = labels.get("le")
        try:
            bound = float(raw)
        except (TypeError, ValueError):
            return f"{name}: unreadable bucket bound le={raw!r}"
        if math.isnan(bound) or math.isnan(value):
            return f"{name}: NaN in its buckets"
        per_series.setdefault(_key(labels), {})[bound] = value
    counts = {_key(labels): value for labels, value in samples.get(f"{name}_count", [])}
    bounds: tuple[float, ...] | None = None
    series: dict[str, list[float]] = {}
    for key, buckets in per_series.items():
        ordered = tuple(sorted(buckets))
        if not ordered or not math.isinf(ordered[-1]):
            return f"{name}: series {{{key}}} has no +Inf bucket"
        if bounds is None:
            bounds = ordered
        elif ordered != bounds:
            return f"{name}: series {{{key}}} has other bucket bounds than the rest"
        values = [buckets[b] for b in ordered]
        if any(later < earlier for earlier, later in pairwise(values)):
            return f"{name}: series {{{key}}} has bucket counts that go down as le grows"
        if key in counts and counts[key] != values[-1]:
            return f"{name}: series {{{key}}} _count {counts[key]:g} differs from its +Inf bucket {values[-1]:g}"
        series[key] = values
    return Histogram(name, bounds or (), series)


def parse_engine_metrics(text: str, engine: str) -> EngineScrape:
    """The series the console keeps from one scrape of `engine` ("vllm" or "sglang")."""
    names = ENGINE_NAMES[engine]
    samples = _samples(text)
    out = EngineScrape()

    def total(name: str) -> float | None:
        rows = samples.get(name)
        return sum(v for _, v in rows) if rows else None

    out.running, out.waiting = total(names.running), total(names.waiting)
    kv_rows = samples.get(names.kv_cache)
    out.kv_cache = sum(v for _, v in kv_rows) / len(kv_rows) if kv_rows else None
    if names.gen_throughput:
        out.gen_throughput = total(names.gen_throughput)
    pods = {labels[REPLICA_LABEL] for labels, _ in samples.get(names.running, []) if REPLICA_LABEL in labels}
    out.replicas = len(pods) if pods else None
    for kind, name in (("prompt", names.prompt_tokens), ("generation", names.generation_tokens)):
        rows = samples.get(name)
        if rows:
            out.counters[kind] = {_key(labels): value for labels, value in rows}
    for kind, candidates in (("ttft", names.ttft), ("tpot", names.tpot)):
        for name in candidates:
            found = _histogram(name, samples)
            if found is None:
                continue
            if isinstance(found, str):
                out.errors.append(found)
            else:
                out.histograms[kind] = found
            break
    return out
