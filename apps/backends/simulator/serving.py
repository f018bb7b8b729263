"""What a simulated inference service's engines answer on /metrics: vLLM V1 or SGLang. Pure Python.

Names, types, labels and histogram buckets are each engine's own:
* vLLM V1 (docs.vllm.ai/en/stable/usage/metrics/ and vllm/v1/metrics/loggers.py): gauges
  `vllm:num_requests_running`, `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`; counters
  `vllm:prompt_tokens_total`, `vllm:generation_tokens_total`; histograms `vllm:time_to_first_token_seconds`,
  `vllm:inter_token_latency_seconds` (before it, `vllm:time_per_output_token_seconds`),
  `vllm:e2e_request_latency_seconds`; labels `model_name` and `engine`.
* SGLang (docs.sglang.io/references/production_metrics.html and python/sglang/srt/metrics/collector.py):
  gauges `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:token_usage`, `sglang:gen_throughput`;
  counters `sglang:prompt_tokens_total`, `sglang:generation_tokens_total`; histograms
  `sglang:time_to_first_token_seconds`, `sglang:inter_token_latency_seconds`, `sglang:e2e_request_latency_seconds`;
  label `model_name`.

The text is what a scrape of all the service's pods gives (a Prometheus federation): every replica's engine
series, with the `pod` label the scrape adds. A replica that goes away takes its series with it; a new one
starts its counters at zero, as a restarted engine does.

The model, one simulated minute at a time from the service's start: offered load follows a daily curve
with seeded bursts; replicas serve a seeded rate each; what they cannot serve waits, and waiting adds to the
time to first token; busier engines decode slower and fill their KV cache. With autoscaling, replicas follow
KEDA's AverageValue rule on the summed waiting gauge, ceil(waiting / threshold) within min..max: new replicas
serve after their cold start (coldstart.py: the image pull unless pre-pulled, the weights, the engine's start; the
first replicas' too), and scale-in waits out HPA's 5-minute stabilization window. (The replica
count is the telemetry's own: the simulator's GPU placement keeps the submitted replicas.) Everything is
drawn from (seed, service name, minute), so every process renders the same numbers, counters only grow, and
a per-process cache of the latest state keeps a scrape to the minutes since the previous one.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime

from apps.backends.simulator.seeding import rng, stable_hash, stable_hex, unit

STEP_S = 60
LOAD_DELAY_STEPS = 3  # a new replica serves once its weights are loaded (the default; coldstart.py times it)
SCALE_IN_STEPS = 5  # HPA's default scale-down stabilization window (300 s)
CLIENT_PATIENCE_S = 30  # a queue longer than this many seconds of the replicas' work: new clients give up
BURST_BLOCK_STEPS = 10  # each 10-minute block may hold one burst
BURST_CHANCE = 0.35
CACHE_SIZE = 512
SIGMA_TTFT, SIGMA_ITL, SIGMA_E2E = 0.45, 0.3, 0.35

# Buckets exactly as the engines declare them.
VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0)
VLLM_TTFT += (40.0, 80.0, 160.0, 640.0, 2560.0)
VLLM_ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
VLLM_E2E = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0)
VLLM_E2E += (960.0, 1920.0, 7680.0)
SGLANG_TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0)
SGLANG_ITL = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4)
SGLANG_ITL += (0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
SGLANG_E2E = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0)
SGLANG_E2E += (600.0, 1200.0, 1800.0, 2400.0)


@dataclass(frozen=True)
class EngineMetrics:
    """One engine's metric names, help texts and buckets."""

    running: tuple[str, str]
    waiting: tuple[str, str]
    kv_cache: tuple[str, str]
    prompt_tokens: tuple[str, str]
    generation_tokens: tuple[str, str]
    ttft: tuple[str, str, tuple[float, ...]]
    itl: tuple[str, str, tuple[float, ...]]
    e2e: tuple[str, str, tuple[float, ...]]
    throughput: tuple[str, str] | None = None
    engine_label: bool = False  # vLLM V1 labels every series with its engine core index


ENGINES = {
    "vllm": EngineMetrics(
        running=("vllm:num_requests_running", "Number of requests in model execution batches."),
        waiting=("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
        kv_cache=("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
        prompt_tokens=("vllm:prompt_tokens_total", "Number of prefill tokens processed."),
        generation_tokens=("vllm:generation_tokens_total", "Number of generation tokens processed."),
        ttft=("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", VLLM_TTFT),
        itl=("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", VLLM_ITL),
        e2e=("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", VLLM_E2E),
        engine_label=True,
    ),
    "sglang": EngineMetrics(
        running=("sglang:num_running_reqs", "The number of running requests."),
        waiting=("sglang:num_queue_reqs", "The number of requests in the waiting queue."),
        kv_cache=("sglang:token_usage", "The token usage."),
        prompt_tokens=("sglang:prompt_tokens_total", "Number of prefill tokens processed."),
        generation_tokens=("sglang:generation_tokens_total", "Number of generation tokens processed."),
        ttft=("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", SGLANG_TTFT),
        itl=("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", SGLANG_ITL),
        e2e=("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", SGLANG_E2E),
        throughput=("sglang:gen_throughput", "The generation throughput (token/s)."),
    ),
}


@dataclass(frozen=True)
class ServiceProfile:
    """What the simulation needs to know about one running service. `waiting_threshold` None: fixed replicas."""

    name: str
    engine: str
    model: str
    seed: int
    started_at: datetime
    replicas: int
    min_replicas: int = 1
    max_replicas: int = 1
    waiting_threshold: int | None = None
    ready_after_s: int = 0  # the first replicas serve this long after the start (their cold start)
    scale_up_s: int = LOAD_DELAY_STEPS * STEP_S  # a replica added later serves this long after it is added


@dataclass(frozen=True)
class _Traits:
    """Seeded per service: its engines' speed and its clients' habits."""

    capacity_rps: float  # requests/s one replica serves before a queue forms
    base_rps: float  # mean offered load at the daily mean
    prompt_tokens: float
    output_tokens: float
    prefill_s: float  # time to first token of an idle replica
    itl_s: float  # inter-token latency of an idle replica
    slots: int  # requests one replica runs at once at full load


def _traits(profile: ServiceProfile) -> _Traits:
    draw = rng(profile.seed, "service", profile.name)
    capacity = draw.uniform(4.0, 9.0)
    prompt, output = draw.uniform(400, 1500), draw.uniform(150, 400)
    prefill, itl = draw.uniform(0.08, 0.22), draw.uniform(0.015, 0.035)
    # Autoscaled services are sized to their minimum and meet their peaks with more replicas.
    share = draw.uniform(0.6, 0.8) if profile.waiting_threshold else draw.uniform(0.4, 0.55)
    base_replicas = profile.min_replicas if profile.waiting_threshold else profile.replicas
    slots = max(8, round(capacity * (prefill + output * itl) * 1.3))
    return _Traits(capacity, base_replicas * capacity * share, prompt, output, prefill, itl, slots)


def offered_rps(profile: ServiceProfile, traits: _Traits, minute: int) -> float:
    """Requests/s clients send in simulated `minute` (minutes since the epoch): daily curve x burst x noise."""
    hour = (minute % 1440) / 60
    daily = 1 + 0.45 * math.sin(2 * math.pi * (hour - 10) / 24)  # peak mid-afternoon UTC
    block = minute // BURST_BLOCK_STEPS
    burst = max(_burst(profile, block, minute), _burst(profile, block - 1, minute))
    noise = 0.9 + 0.2 * unit(stable_hash(profile.seed, profile.name, "noise", minute), 0)
    return traits.base_rps * daily * burst * noise


def _burst(profile: ServiceProfile, block: int, minute: int) -> float:
    draw = stable_hash(profile.seed, profile.name, "burst", block)
    if unit(draw, 0) >= BURST_CHANCE:
        return 1.0
    start = block * BURST_BLOCK_STEPS + int(unit(draw, 8) * BURST_BLOCK_STEPS)
    length, size = 2 + int(unit(draw, 16) * 6), 1.5 + 0.9 * unit(draw, 24)
    return size if start <= minute < start + length else 1.0


# --- the state, one minute at a time ------------------------------------------------------------------------


@dataclass
class _Replica:
    pod: str
    ready_at: int  # the minute it starts serving
    # Cumulative values in this order: ttft buckets, count, sum; itl buckets, count, sum; e2e buckets,
    # count, sum; prompt tokens; generation tokens.
    counters: list[float]


@dataclass
class _State:
    minute: int  # the next minute to simulate
    waiting: float
    replicas: list[_Replica]
    low_since: int | None = None  # first minute the autoscaler wanted fewer replicas
    added: int = 0  # replicas ever created: names new pods

    def copy(self) -> _State:
        return replace(self, replicas=[_Replica(r.pod, r.ready_at, list(r.counters)) for r in self.replicas])


@dataclass
class _Minute:
    """What one minute did: per-ready-replica increments and the gauges at its end."""

    serving: list[_Replica]
    increments: list[float]  # each serving replica's share
    running: float  # per serving replica
    waiting: float  # total, at the minute's end
    kv_cache: float
    gen_throughput: float  # tokens/s per serving replica


def _layout(metrics: EngineMetrics) -> int:
    return sum(len(h[2]) + 2 for h in (metrics.ttft, metrics.itl, metrics.e2e)) + 2


def _pod(profile: ServiceProfile, index: int) -> str:
    # A Deployment's pods: <name>-<pod-template-hash>-<5 characters>.
    template = stable_hex(profile.seed, profile.name, "template", chars=10)
    return f"{profile.name}-{template}-{stable_hex(profile.seed, profile.name, 'pod', index, chars=5)}"


def _initial(profile: ServiceProfile, start: int, width: int) -> _State:
    ready = start + math.ceil(profile.ready_after_s / STEP_S)
    replicas = [_Replica(_pod(profile, i), ready, [0.0] * width) for i in range(profile.replicas)]
    return _State(minute=start, waiting=0.0, replicas=replicas, added=profile.replicas)


_LOGS: dict[float, float] = {}


def _histogram(out: list[float], buckets: tuple[float, ...], count: float, median: float, sigma: float) -> None:
    """Append a lognormal(median, sigma) sample of `count` observations: per-bucket counts, count, sum."""
    centre, scale, erf = math.log(median), 1 / (sigma * math.sqrt(2)), math.erf
    for bound in buckets:
        log = _LOGS.get(bound)
        if log is None:
            log = _LOGS[bound] = math.log(bound)
        out.append(count * 0.5 * (1 + erf((log - centre) * scale)))
    out.append(count)
    out.append(count * median * math.exp(sigma * sigma / 2))  # the lognormal's mean


def _minute(profile: ServiceProfile, metrics: EngineMetrics, traits: _Traits, state: _State) -> _Minute:
    minute = state.minute
    serving = [r for r in state.replicas if r.ready_at <= minute]
    n = len(serving)
    capacity = n * traits.capacity_rps
    backlog = state.waiting + offered_rps(profile, traits, minute) * STEP_S
    served = min(backlog, capacity * STEP_S)
    waiting = min(backlog - served, max(capacity, traits.capacity_rps) * CLIENT_PATIENCE_S)
    utilization = min(1.0, backlog / STEP_S / capacity) if capacity else 1.0
    queue_s = (state.waiting + waiting) / 2 / capacity if capacity else STEP_S
    ttft = traits.prefill_s * (1 + 0.5 * utilization**2) + queue_s
    itl = traits.itl_s * (1 + 0.9 * utilization)
    e2e = ttft + traits.output_tokens * itl
    share = served / n if n else 0.0
    increments: list[float] = []
    _histogram(increments, metrics.ttft[2], share, ttft, SIGMA_TTFT)
    _histogram(increments, metrics.itl[2], share * (traits.output_tokens - 1), itl, SIGMA_ITL)
    _histogram(increments, metrics.e2e[2], share, e2e, SIGMA_E2E)
    increments += [share * traits.prompt_tokens, share * traits.output_tokens]
    per_replica_rps = share / STEP_S
    running = min(float(traits.slots), per_replica_rps * (traits.prefill_s + traits.output_tokens * itl))
    kv_cache = min(0.99, 0.03 + 0.9 * running / traits.slots + (0.05 if waiting else 0.0))
    return _Minute(serving, increments, running, waiting, kv_cache, per_replica_rps * traits.output_tokens)


def _advance(profile: ServiceProfile, metrics: EngineMetrics, traits: _Traits, state: _State, until: int) -> None:
    """Simulate whole minutes up to (not including) `until`."""
    while state.minute < until:
        step = _minute(profile, metrics, traits, state)
        for replica in step.serving:
            counters = replica.counters
            for i, value in enumerate(step.increments):
                counters[i] += value
        state.waiting = step.waiting
        if profile.waiting_threshold:
            _autoscale(profile, state, step.waiting)
        state.minute += 1


def _autoscale(profile: ServiceProfile, state: _State, waiting: float) -> None:
    desired = min(max(math.ceil(waiting / profile.waiting_threshold), profile.min_replicas), profile.max_replicas)
    current = len(state.replicas)
    if desired > current:
        width = len(state.replicas[0].counters) if state.replicas else 0
        for _ in range(desired - current):
            ready = state.minute + 1 + math.ceil(profile.scale_up_s / STEP_S)
            state.replicas.append(_Replica(_pod(profile, state.added), ready, [0.0] * width))
            state.added += 1
        state.low_since = None
    elif desired < current:
        if state.low_since is None:
            state.low_since = state.minute
        if state.minute - state.low_since + 1 >= SCALE_IN_STEPS:
            del state.replicas[desired:]  # the newest go first
            state.low_since = None
    else:
        state.low_since = None


_cache: OrderedDict[ServiceProfile, _State] = OrderedDict()
_cache_lock = threading.Lock()


def _state_at(profile: ServiceProfile, metrics: EngineMetrics, traits: _Traits, minute: int) -> _State:
    """The state at the start of `minute`, advanced from this process's latest state of the service."""
    with _cache_lock:
        cached = _cache.get(profile)
        if cached is not None:
            _cache.move_to_end(profile)
    start = int(profile.started_at.timestamp() // STEP_S)
    if cached is not None and cached.minute <= minute:
        state = cached.copy()
    else:
        state = _initial(profile, start, _layout(metrics))
    _advance(profile, metrics, traits, state, max(minute, start))
    with _cache_lock:
        _cache[profile] = state.copy()
        _cache.move_to_end(profile)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return state


# --- the exposition text ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceSnapshot:
    """The service at one instant: what the text shows, for tests and the page's own checks."""

    replicas: int  # serving replicas
    starting: int  # replicas still loading weights
    waiting: float
    offered_rps: float
    text: str


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value))


def render_service_metrics(profile: ServiceProfile, now: datetime) -> ServiceSnapshot:
    """The service's /metrics text at simulated time `now`."""
    metrics = ENGINES[profile.engine]
    traits = _traits(profile)
    seconds = now.timestamp()
    minute = int(seconds // STEP_S)
    fraction = (seconds - minute * STEP_S) / STEP_S
    state = _state_at(profile, metrics, traits, minute)
    start = int(profile.started_at.timestamp() // STEP_S)
    step = _minute(profile, metrics, traits, state) if minute >= start else None
    serving = step.serving if step else []
    model = f'model_name="{_escape(profile.model)}"' + (',engine="0"' if metrics.engine_label else "")
    labels = {replica.pod: f'{model},pod="{replica.pod}"' for replica in serving}
    out: list[str] = []

    def family(name: str, help_: str, kind: str) -> None:
        out.append(f"# HELP {name} {help_}\n# TYPE {name} {kind}\n")

    def gauge(spec: tuple[str, str], value_of) -> None:
        family(spec[0], spec[1], "gauge")
        for replica in serving:
            out.append(f"{spec[0]}{{{labels[replica.pod]}}} {_number(value_of(replica))}\n")

    def cumulative(replica: _Replica, index: int) -> float:
        value = replica.counters[index] + fraction * step.increments[index]
        return float(math.floor(value))

    n = max(len(serving), 1)
    jitter = {r.pod: 0.92 + 0.16 * unit(stable_hash(profile.seed, r.pod, minute), 0) for r in serving}
    if step is not None:
        waiting_each = step.waiting / n
        gauge(metrics.running, lambda r: round(step.running * jitter[r.pod]))
        gauge(metrics.waiting, lambda r: round(waiting_each))
        gauge(metrics.kv_cache, lambda r: min(0.99, step.kv_cache * jitter[r.pod]))
        offset = 0
        for name, help_, buckets in (metrics.ttft, metrics.itl, metrics.e2e):
            family(name, help_, "histogram")
            for replica in serving:
                label = labels[replica.pod]
                for i, bound in enumerate(buckets):
                    le = _number(bound)
                    out.append(f'{name}_bucket{{{label},le="{le}"}} {_number(cumulative(replica, offset + i))}\n')
                count = cumulative(replica, offset + len(buckets))
                out.append(f'{name}_bucket{{{label},le="+Inf"}} {_number(count)}\n')
                out.append(f"{name}_count{{{label}}} {_number(count)}\n")
                at = offset + len(buckets) + 1
                total = replica.counters[at] + fraction * step.increments[at]
                out.append(f"{name}_sum{{{label}}} {_number(total)}\n")
            offset += len(buckets) + 2
        for spec, index in ((metrics.prompt_tokens, offset), (metrics.generation_tokens, offset + 1)):
            family(spec[0], spec[1], "counter")
            for replica in serving:
                out.append(f"{spec[0]}{{{labels[replica.pod]}}} {_number(cumulative(replica, index))}\n")
        if metrics.throughput:
            gauge(metrics.throughput, lambda r: step.gen_throughput * jitter[r.pod])
    starting = len(state.replicas) - len(serving)
    offered = offered_rps(profile, traits, minute)
    waiting = step.waiting if step else 0.0
    return ServiceSnapshot(len(serving), starting, waiting, offered, "".join(out))
