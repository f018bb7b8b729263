"""The specs' limits and their error; the spec types themselves are in `apps.backends.render.spec` (the
renderers' input, below this app), re-exported by `apps.workloads.specs`."""

from __future__ import annotations

from apps.backends.types import Sharing, Topology
from apps.core.text import N_, translate

KINDS = ("training", "inference")
SHARING_MODES = tuple(mode.value for mode in Sharing)
TOPOLOGIES = tuple(level.value for level in Topology)
ENGINES = ("vllm", "sglang")

MIG_COMPUTE_SLICES = 7  # a MIG-capable GPU has 7 compute slices and 8 memory slices
MIG_MEMORY_SLICES = 8
NAME_MAX = 63  # DNS-1123 label; renderers shorten derived names (pods, StatefulSets) deterministically
MAX_WORKERS = 10_000
MAX_LIST = 256  # command, args
MAX_ITEM = 8192  # characters of one argument
MAX_ENV = 128
MAX_ENV_VALUE = 32_768
MAX_VOLUMES = 16
MAX_EXTRA_ARGS = 64
MAX_RUNTIME_S = 365 * 86_400
SERVICE_DURATION_S = 30 * 86_400  # what the simulator runs a service for: until cancelled, or its max runtime
CONSOLE_PORTS = {6379: N_("Ray's GCS port on multi-node vLLM"), 20000: N_("SGLang's multi-node init port")}
# Environment the console sets itself; a user value would break rendezvous, LWS or Slurm wiring.
RESERVED_ENV = frozenset({"CHECKPOINT_PATH"})
RESERVED_ENV_PREFIXES = ("GPU_CONSOLE_", "LWS_", "SLURM_", "TORCHELASTIC_")
# Mounting over these would break the container (or leak a service account token path).
RESERVED_MOUNTS = ("/dev", "/proc", "/sys", "/etc", "/var/run/secrets")

# Engine flags the console derives from the spec; in extra_args they would contradict it.
ENGINE_FLAGS = {
    "vllm": frozenset(
        {
            "--model",
            "--tensor-parallel-size",
            "-tp",
            "--pipeline-parallel-size",
            "-pp",
            "--data-parallel-size",
            "-dp",
            "--port",
            "--host",
            "--max-model-len",
            "--gpu-memory-utilization",
            "--distributed-executor-backend",
        }
    ),
    "sglang": frozenset(
        {
            "--model-path",
            "--model",
            "--tp-size",
            "--tp",
            "--tensor-parallel-size",
            "--pp-size",
            "--pipeline-parallel-size",
            "--dp-size",
            "--dp",
            "--data-parallel-size",
            "--port",
            "--host",
            "--context-length",
            "--mem-fraction-static",
            "--nnodes",
            "--node-rank",
            "--dist-init-addr",
            "--enable-metrics",
        }
    ),
}


class SpecError(ValueError):
    """A spec that cannot run. `fields` maps a field path ("workers", "sharing.mig_profile", "env.FOO",
    "volumes[0].claim") to its messages; the message lists them all."""

    def __init__(self, fields: dict[str, list[str]], message: str = "") -> None:
        self.fields = fields
        summary = "; ".join(f"{path}: {' '.join(msgs)}" for path, msgs in fields.items())
        super().__init__(message or f"Invalid spec: {summary}")

    def translated(self) -> tuple[str, dict[str, list[str]]]:
        """(message, fields) in the active language, for a page or an API client (the field messages are
        apps.core.text Texts); English, the same as `str(self)` and `fields`, without Django or in English."""
        fields = {path: [str(translate(message)) for message in msgs] for path, msgs in self.fields.items()}
        summary = "; ".join(f"{path}: {' '.join(msgs)}" for path, msgs in fields.items())
        return str(translate(N_("Invalid spec: %(summary)s", summary=summary))), fields
