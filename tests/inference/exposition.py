"""Exposition text as vLLM V1 and SGLang print it (names, types, labels from their docs), with chosen numbers."""

from __future__ import annotations

TTFT_BOUNDS = (0.1, 0.25, 0.5, 1.0)  # a short bucket list keeps the hand-computed cases readable


def _histogram(name: str, help_: str, per_pod: dict[str, list[float]], labels: str, bounds=TTFT_BOUNDS) -> str:
    out = [f"# HELP {name} {help_}\n# TYPE {name} histogram\n"]
    for pod, counts in per_pod.items():
        label = f'{labels},pod="{pod}"'
        for bound, count in zip([*map(str, bounds), "+Inf"], counts, strict=True):
            out.append(f'{name}_bucket{{{label},le="{bound}"}} {float(count)}\n')
        out.append(f"{name}_count{{{label}}} {float(counts[-1])}\n")
        out.append(f"{name}_sum{{{label}}} {float(counts[-1]) * 0.3}\n")
    return "".join(out)


def vllm_text(
    ttft: dict[str, list[float]],
    itl: dict[str, list[float]] | None = None,
    *,
    running: float = 3,
    waiting: float = 1,
    kv: float = 0.25,
    prompt: float = 1000,
    generation: float = 500,
    model: str = "meta-llama/Llama-3.1-8B-Instruct",
) -> str:
    labels = f'engine="0",model_name="{model}"'
    pods = list(ttft)
    text = []
    for name, help_, value in (
        ("vllm:num_requests_running", "Number of requests in model execution batches.", running),
        ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", waiting),
        ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv),
    ):
        text.append(f"# HELP {name} {help_}\n# TYPE {name} gauge\n")
        text += [f'{name}{{{labels},pod="{p}"}} {float(value)}\n' for p in pods]
    for name, value in (("vllm:prompt_tokens_total", prompt), ("vllm:generation_tokens_total", generation)):
        text.append(f"# HELP {name} Number of tokens processed.\n# TYPE {name} counter\n")
        text += [f'{name}{{{labels},pod="{p}"}} {float(value)}\n' for p in pods]
    text.append(
        _histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft, labels)
    )
    if itl is not None:
        text.append(
            _histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itl, labels)
        )
    return "".join(text)


SGLANG_DOCS_SAMPLE = """\
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.557572e+06
# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.28
# HELP sglang:num_running_reqs The number of running requests
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 162.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2826.0
# HELP sglang:gen_throughput The generation throughput (token/s)
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="meta-llama/Llama-3.1-8B-Instruct"} 3112.5
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.3518979474117756e+06
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
sglang:time_to_first_token_seconds_bucket{le="0.2",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
sglang:time_to_first_token_seconds_bucket{le="0.4",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
sglang:time_to_first_token_seconds_bucket{le="1.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 100.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 120.0
sglang:time_to_first_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 120.0
# HELP sglang:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE sglang:inter_token_latency_seconds histogram
sglang:inter_token_latency_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 29.5
sglang:inter_token_latency_seconds_bucket{le="0.01",model_name="meta-llama/Llama-3.1-8B-Instruct"} 100.0
sglang:inter_token_latency_seconds_bucket{le="0.02",model_name="meta-llama/Llama-3.1-8B-Instruct"} 900.0
sglang:inter_token_latency_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1000.0
sglang:inter_token_latency_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 1000.0
"""
