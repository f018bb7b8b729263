"""vLLM and SGLang: their command lines, health endpoint, queue metrics, and the graceful drain.

Flag names (checked against each project's docs and server arguments):
* vLLM: `vllm serve <model> --host --port --tensor-parallel-size --pipeline-parallel-size --max-model-len
  --gpu-memory-utilization`, multi-node with `--distributed-executor-backend ray` on a Ray cluster.
* SGLang: `python3 -m sglang.launch_server --model-path --host --port --tp-size --pp-size --dp-size
  --context-length --mem-fraction-static --enable-metrics`, multi-node with `--nnodes --node-rank
  --dist-init-addr`. SGLang names the length limit `--context-length`; its closest knob to vLLM's
  gpu-memory-utilization is `--mem-fraction-static` (weights plus KV cache), so that is what the spec's
  value sets. Metrics are off unless `--enable-metrics`; autoscaling and the drain need them.

Both serve GET /health (200 once the model is loaded) and Prometheus metrics on the API port:
`vllm:num_requests_waiting` / `vllm:num_requests_running` and `sglang:num_queue_reqs` /
`sglang:num_running_reqs`.
"""

from __future__ import annotations

from apps.backends.render.spec import InferenceServiceSpec

HEALTH_PATH = "/health"
WAITING_METRIC = {"vllm": "vllm:num_requests_waiting", "sglang": "sglang:num_queue_reqs"}
RUNNING_METRIC = {"vllm": "vllm:num_requests_running", "sglang": "sglang:num_running_reqs"}
RAY_PORT = 6379
SGLANG_DIST_PORT = 20000
SETTLE_S = 5  # the drain's first wait: for kube-proxy and ingresses to see the endpoint removed

# The preStop hook, run as `python3 -c DRAIN_SCRIPT <port> <drain s> <settle s> <metric>...` (both images ship
# python3; no shell, so nothing here is parsed twice). Kubernetes takes a terminating pod out of the
# Service's endpoints at the moment it runs preStop and sends SIGTERM only after preStop returns. So
# intake stops by itself; the hook waits for the endpoint removal to propagate, then for the engine's own
# running + waiting request gauges to reach zero, at most the drain time. SIGTERM then finds an idle
# engine, and terminationGracePeriodSeconds (validated > drain + 10 s) leaves it time to exit.
DRAIN_SCRIPT = """\
import sys, time, urllib.request
port, drain, settle, names = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), set(sys.argv[4:])
deadline = time.monotonic() + drain
time.sleep(min(drain, settle))  # endpoint removal reaches kube-proxy and ingresses
while time.monotonic() < deadline:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except OSError:
        break
    busy = 0.0
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in names:
            busy += float((line.rsplit("}", 1)[1] if "{" in line else line[len(name):]).split()[0])
    if busy <= 0:
        break
    time.sleep(1)
"""


# Prefill/decode disaggregation, per engine:
# * SGLang: `--disaggregation-mode prefill|decode` and `--disaggregation-transfer-backend mooncake|nixl`; a prefill
#   engine serves its bootstrap server on --disaggregation-bootstrap-port (8998)
#   (https://docs.sglang.io/advanced_features/pd_disaggregation.html).
# * vLLM: a KV connector on both pools, `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`;
#   NIXL's side channel listens on VLLM_NIXL_SIDE_CHANNEL_PORT (5600)
#   (https://docs.vllm.ai/en/latest/features/nixl_connector_usage.html).
SGLANG_BOOTSTRAP_PORT = 8998
NIXL_KV_TRANSFER_CONFIG = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def pd_argv(spec: InferenceServiceSpec, role: str) -> list[str]:
    """The flags that make an engine one side of a prefill/decode split (`role`: prefill or decode)."""
    assert spec.disaggregation is not None and role in ("prefill", "decode"), role
    if spec.engine == "sglang":
        return [
            "--disaggregation-mode",
            role,
            "--disaggregation-transfer-backend",
            spec.disaggregation.transfer_backend,
        ]
    return ["--kv-transfer-config", NIXL_KV_TRANSFER_CONFIG]


def engine_argv(
    spec: InferenceServiceSpec,
    *,
    ray: bool = False,
    distributed: tuple[str, str, str] | None = None,
    pd_role: str | None = None,
) -> list[str]:
    """The engine's command line for one replica.

    `ray`: vLLM across nodes through a Ray cluster. `distributed`: SGLang across nodes, as
    (nnodes, node rank, init address) strings that the caller fills with its own variables.
    `pd_role`: prefill or decode, for one pool of a disaggregated service.
    """
    pd = pd_argv(spec, pd_role) if pd_role else []
    if spec.engine == "vllm":
        argv = [
            "vllm",
            "serve",
            spec.model,
            "--host",
            "0.0.0.0",  # noqa: S104 - the server must listen on the pod's address
            "--port",
            str(spec.port),
            "--tensor-parallel-size",
            str(spec.tensor_parallel),
            "--pipeline-parallel-size",
            str(spec.pipeline_parallel),
        ]
        if spec.max_model_len:
            argv += ["--max-model-len", str(spec.max_model_len)]
        argv += ["--gpu-memory-utilization", f"{spec.gpu_memory_utilization:g}"]
        if ray:
            argv += ["--distributed-executor-backend", "ray"]
        return argv + pd + list(spec.extra_args)
    argv = [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        spec.model,
        "--host",
        "0.0.0.0",  # noqa: S104 - the server must listen on the pod's address
        "--port",
        str(spec.port),
        "--tp-size",
        str(spec.tensor_parallel),
    ]
    if spec.pipeline_parallel > 1:
        argv += ["--pp-size", str(spec.pipeline_parallel)]
    if spec.data_parallel > 1:
        argv += ["--dp-size", str(spec.data_parallel)]
    if spec.max_model_len:
        argv += ["--context-length", str(spec.max_model_len)]
    argv += ["--mem-fraction-static", f"{spec.gpu_memory_utilization:g}", "--enable-metrics"]
    if distributed:
        nnodes, rank, address = distributed
        argv += ["--nnodes", nnodes, "--node-rank", rank, "--dist-init-addr", address]
    return argv + pd + list(spec.extra_args)


def drain_command(spec: InferenceServiceSpec) -> list[str]:
    """The preStop exec command (see DRAIN_SCRIPT)."""
    return [
        "python3",
        "-c",
        DRAIN_SCRIPT,
        str(spec.port),
        str(spec.shutdown.drain_seconds),
        str(SETTLE_S),
        RUNNING_METRIC[spec.engine],
        WAITING_METRIC[spec.engine],
    ]


def ray_wait_for_nodes(count_var: str) -> str:
    """Shell lines (on the Ray head) that wait until `$count_var` Ray nodes are alive.

    vLLM sizes its placement group from the Ray cluster when it starts, so every node must have joined.
    """
    probe = (
        'import ray; ray.init(address="auto", logging_level="ERROR"); print(sum(1 for n in ray.nodes() if n["Alive"]))'
    )
    return f'until [ "$(python3 -c \'{probe}\' 2>/dev/null || echo 0)" -ge "${count_var}" ]; do\n  sleep 5\ndone\n'
