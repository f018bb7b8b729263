"""Engine exposition parsing with the engines' real names, and quantiles from bucket deltas (hand-computed)."""

from __future__ import annotations

import math

import pytest

from apps.inference.parsing import ExpositionError, parse_engine_metrics
from apps.inference.quantiles import count_above, histogram_quantile, series_delta
from tests.inference.exposition import SGLANG_DOCS_SAMPLE, vllm_text

INF = math.inf
BEFORE = [10, 20, 30, 40, 40]  # cumulative counts at le 0.1, 0.25, 0.5, 1.0, +Inf
AFTER = [10, 60, 110, 140, 140]


def test_vllm_real_names_per_series_and_replicas():
    text = vllm_text({"a": BEFORE, "b": AFTER}, {"a": [1, 2, 3, 4, 5]}, running=3, waiting=2, kv=0.5)
    scrape = parse_engine_metrics(text, "vllm")
    assert (scrape.running, scrape.waiting, scrape.kv_cache, scrape.replicas) == (6, 4, 0.5, 2)
    ttft = scrape.histograms["ttft"]
    assert ttft.name == "vllm:time_to_first_token_seconds"
    assert ttft.bounds == (0.1, 0.25, 0.5, 1.0, INF)
    assert sorted(ttft.series.values()) == [BEFORE, AFTER]
    assert scrape.histograms["tpot"].name == "vllm:inter_token_latency_seconds"
    assert set(scrape.counters) == {"prompt", "generation"} and len(scrape.counters["prompt"]) == 2
    assert scrape.errors == []


def test_sglang_docs_sample():
    scrape = parse_engine_metrics(SGLANG_DOCS_SAMPLE, "sglang")
    assert (scrape.running, scrape.waiting, scrape.kv_cache, scrape.gen_throughput) == (162, 2826, 0.28, 3112.5)
    assert scrape.replicas is None  # a bare engine: no pod label
    assert scrape.histograms["ttft"].series == {
        "model_name=meta-llama/Llama-3.1-8B-Instruct": [0.0, 0.0, 12.0, 100.0, 120.0]
    }
    assert scrape.histograms["tpot"].name == "sglang:inter_token_latency_seconds"
    assert scrape.counters["generation"] == {"model_name=meta-llama/Llama-3.1-8B-Instruct": 7557572.0}


def test_older_vllm_inter_token_name_is_read():
    text = vllm_text({"a": BEFORE}).replace("vllm:time_to_first_token_seconds", "vllm:time_per_output_token_seconds")
    scrape = parse_engine_metrics(text, "vllm")
    assert "ttft" not in scrape.histograms
    assert scrape.histograms["tpot"].name == "vllm:time_per_output_token_seconds"


def _ttft_only(change):
    """Apply `change` to the TTFT histogram's lines only (the inter-token histogram shares the bounds)."""

    def mutate(text: str) -> str:
        lines = [
            change(line) if line.startswith("vllm:time_to_first_token_seconds") else line for line in text.split("\n")
        ]
        return "\n".join(line for line in lines if line is not None)

    return mutate


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (_ttft_only(lambda line: line.replace('le="+Inf"', 'le="5.0"')), "no +Inf bucket"),
        (_ttft_only(lambda line: line.replace('le="0.25"', 'le="quarter"')), "unreadable bucket bound"),
        (_ttft_only(lambda line: line.replace('le="0.5"} 30.0', 'le="0.5"} 3.0')), "go down as le grows"),
        (_ttft_only(lambda line: line.replace("} 40.0", "} 41.0") if "_count" in line else line), "differs from"),
        (_ttft_only(lambda line: None if 'pod="b",le="0.25"' in line else line), "other bucket bounds"),
    ],
)
def test_garbled_histogram_is_dropped_with_an_error(mutate, fragment):
    text = mutate(vllm_text({"a": BEFORE, "b": BEFORE}, {"a": [1, 2, 3, 4, 5], "b": [1, 2, 3, 4, 5]}))
    scrape = parse_engine_metrics(text, "vllm")
    assert "ttft" not in scrape.histograms
    assert len(scrape.errors) == 1 and fragment in scrape.errors[0]
    assert "tpot" in scrape.histograms and scrape.running == 6  # the rest of the scrape is kept


def test_text_that_is_not_exposition_is_an_error():
    with pytest.raises(ExpositionError):
        parse_engine_metrics('vllm:num_requests_running{model_name="x" 3\n', "vllm")


def test_quantiles_from_bucket_deltas_by_hand():
    delta = series_delta(AFTER, BEFORE)
    assert delta == [0, 40, 80, 100, 100]
    buckets = list(zip((0.1, 0.25, 0.5, 1.0, INF), delta, strict=True))
    # p50: rank 50 lies in (0.25, 0.5] holding 40..80: 0.25 + 0.25 * (50 - 40) / 40
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.3125)
    # p99: rank 99 lies in (0.5, 1.0] holding 80..100: 0.5 + 0.5 * (99 - 80) / 20
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.975)
    # p10: rank 10 in the first non-empty bucket (0.1, 0.25]: 0.1 + 0.15 * 10 / 40
    assert histogram_quantile(0.1, buckets) == pytest.approx(0.1375)
    # above 0.3 s: 100 - (40 + 40 * 0.05 / 0.25) = 52; above 2 s (past the last finite bound): none
    assert count_above(0.3, buckets) == pytest.approx(52)
    assert count_above(2.0, buckets) == 0


def test_quantile_edges_follow_prometheus():
    assert histogram_quantile(0.99, [(0.5, 0), (1.0, 0), (INF, 0)]) is None  # no observations: NaN
    assert histogram_quantile(0.99, [(0.5, 10), (1.0, 20), (INF, 30)]) == 1.0  # in +Inf: the highest finite bound
    assert histogram_quantile(0.25, [(0.5, 10), (1.0, 20), (INF, 30)]) == pytest.approx(0.5 * 7.5 / 10)
    assert count_above(5.0, [(0.5, 10), (1.0, 20), (INF, 30)]) == 10  # the +Inf bucket's observations
    with pytest.raises(ValueError, match=r"\+Inf"):
        histogram_quantile(0.5, [(0.5, 1)])


def test_a_series_that_went_down_was_restarted():
    assert series_delta([1, 2, 3], [5, 6, 7]) == [1, 2, 3]
    assert series_delta([1, 2, 3], None) == [1, 2, 3]
    assert series_delta([5, 6, 7], [1, 2, 3]) == [4, 4, 4]
