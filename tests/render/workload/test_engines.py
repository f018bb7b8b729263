"""Engine command lines and the preStop drain, run for real against a stand-in metrics endpoint."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from apps.backends.render.workload.engines import DRAIN_SCRIPT, RUNNING_METRIC, WAITING_METRIC, engine_argv
from apps.workloads.specs import apply_overrides, parse_spec
from tests.render.workload.cases import CATALOG, SERVE


def serve(**overrides):
    return parse_spec("inference", apply_overrides(SERVE, overrides), CATALOG)


def test_vllm_command_line():
    spec = serve(max_model_len=8192, gpu_memory_utilization=0.85, extra_args=["--enforce-eager"])
    assert engine_argv(spec) == [
        "vllm",
        "serve",
        "meta-llama/Llama-3.1-70B-Instruct",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--tensor-parallel-size",
        "4",
        "--pipeline-parallel-size",
        "1",
        "--max-model-len",
        "8192",
        "--gpu-memory-utilization",
        "0.85",
        "--enforce-eager",
    ]
    assert engine_argv(spec, ray=True)[-3:] == ["--distributed-executor-backend", "ray", "--enforce-eager"]


def test_sglang_command_line():
    spec = serve(
        engine="sglang",
        image="lmsysorg/sglang:v0.5.3",
        tensor_parallel=2,
        pipeline_parallel=2,
        data_parallel=2,
        max_model_len=4096,
        port=30000,
    )
    assert engine_argv(spec) == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "meta-llama/Llama-3.1-70B-Instruct",
        "--host",
        "0.0.0.0",
        "--port",
        "30000",
        "--tp-size",
        "2",
        "--pp-size",
        "2",
        "--dp-size",
        "2",
        "--context-length",
        "4096",
        "--mem-fraction-static",
        "0.9",
        "--enable-metrics",
    ]
    assert engine_argv(spec, distributed=("2", "0", "lead:20000"))[-6:] == [
        "--nnodes",
        "2",
        "--node-rank",
        "0",
        "--dist-init-addr",
        "lead:20000",
    ]
    assert (RUNNING_METRIC["sglang"], WAITING_METRIC["sglang"]) == ("sglang:num_running_reqs", "sglang:num_queue_reqs")
    assert (RUNNING_METRIC["vllm"], WAITING_METRIC["vllm"]) == (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
    )


class Metrics:
    """A stand-in engine: /metrics reports `busy` running requests for the first `busy_scrapes` scrapes."""

    def __init__(self, busy_scrapes: int) -> None:
        self.busy_scrapes = busy_scrapes
        self.scrapes = 0
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                metrics.scrapes += 1
                busy = 2 if metrics.scrapes <= metrics.busy_scrapes else 0
                body = (
                    "# HELP vllm:num_requests_running Number of requests running.\n"
                    "# TYPE vllm:num_requests_running gauge\n"
                    f'vllm:num_requests_running{{model_name="m"}} {busy}.0\n'
                    f"vllm:num_requests_waiting {busy}\n"
                    'vllm:num_requests_swapped{model_name="m"} 7.0\n'
                ).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def drain(port: int, seconds: float) -> float:
    """Run the preStop hook as the pod would (settle time 0 for the test); return how long it took."""
    start = time.monotonic()
    argv = [sys.executable, "-c", DRAIN_SCRIPT, str(port), str(seconds), "0"]
    subprocess.run([*argv, "vllm:num_requests_running", "vllm:num_requests_waiting"], check=True, timeout=30)
    return time.monotonic() - start


@pytest.fixture
def metrics():
    made: list[Metrics] = []

    def make(busy_scrapes: int) -> Metrics:
        made.append(Metrics(busy_scrapes))
        return made[-1]

    yield make
    for server in made:
        server.close()


def test_drain_returns_as_soon_as_in_flight_requests_are_done(metrics):
    engine = metrics(busy_scrapes=2)
    elapsed = drain(engine.port, 20)
    assert engine.scrapes == 3  # busy, busy, idle
    assert elapsed < 5


def test_drain_gives_up_at_the_drain_deadline(metrics):
    engine = metrics(busy_scrapes=10_000)
    elapsed = drain(engine.port, 1.5)
    assert 1.4 < elapsed < 4 and engine.scrapes >= 2


def test_drain_ends_at_once_when_the_engine_is_gone(metrics):
    engine = metrics(busy_scrapes=0)
    port = engine.port
    engine.close()
    assert drain(port, 20) < 5
