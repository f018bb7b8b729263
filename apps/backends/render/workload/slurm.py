"""`render_slurm(spec, ctx)`: an sbatch script for a training job or an inference service.

Nothing a user typed is interpolated raw. `#SBATCH` lines carry only values checked against a strict
character set here (names are DNS-1123 labels, account/qos/partition [a-z0-9_-], numbers, clean paths),
and sbatch reads directives only up to the first command, so nothing later can add one. In the script
body every user value is a single shell word from `sh_quote`: shlex.quote, or bash's $'...' with \\xHH
escapes for control characters, so no value can even start a new line. The script uses `--` to end
torchrun's options before the user's command, and bash arrays instead of word splitting.

Training: `srun torchrun` on every node, c10d rendezvous on the first host of the allocation.
Inference: the engine as a long-running step, a health-check loop until /health answers (within
readiness.initial_delay_s), then the job lives as long as the engine; it exits non-zero if the engine
dies or never becomes healthy. Replicas become a job array, one replica per array task.
"""

from __future__ import annotations

import re

from apps.backends.render.errors import RenderError
from apps.backends.render.names import is_dns_label, is_dns_subdomain, path_error
from apps.backends.render.result import comment_block
from apps.backends.render.spec import InferenceServiceSpec, Spec, TrainingJobSpec
from apps.backends.render.workload.common import check_env_names, sh_join, sh_quote
from apps.backends.render.workload.containers import container_options
from apps.backends.render.workload.context import RenderedScript, SlurmContext
from apps.backends.render.workload.engines import (
    HEALTH_PATH,
    RAY_PORT,
    SGLANG_DIST_PORT,
    engine_argv,
    ray_wait_for_nodes,
)
from apps.backends.render.workload.network import NetworkPlan, fabric_errors, network_plan
from apps.backends.render.workload.training import torchrun_argv
from apps.backends.types import Sharing, Topology

# Same rules as the quota renderer's sacctmgr names: never a leading '-' (an option), nothing a shell or
# sbatch's directive parser treats specially.
_SLURM_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_GRES_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# What any `#SBATCH` value may contain, checked once more on every line as it is written.
DIRECTIVE_VALUE = re.compile(r"[A-Za-z0-9_.:/%=,+-]+")
SRUN = ("srun", "--kill-on-bad-exit=1")
# Slurm's gres/mps counts a GPU as this many (gres.conf's MPS examples: "Count value to 100 on each" GPU), so
# `--gres=mps:N` is N percent of one GPU, and the job's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is N
# (https://slurm.schedmd.com/gres.html#MPS_Management). The console's MPS replica is 1/replicas of a GPU.
MPS_PER_GPU = 100
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")  # as Kubernetes allows a Secret's key (not "..")


def _srun(container: list[str]) -> str:
    """srun with the container options (pyxis), each one shell-quoted word."""
    return " ".join([*SRUN, *(sh_quote(option) for option in container)])


def output_file(output_dir: str, name: str, job: str = "%j") -> str:
    """The output file the sbatch script names for job `name`: `job` is Slurm's filename pattern in the script
    ("%j", or "%A_%a" for the tasks of an array), a job's real id ("42", "42_3") where the file is read back."""
    return f"{output_dir}/{name}-{job}.out"


def render_slurm(spec: Spec, ctx: SlurmContext) -> RenderedScript:
    """The sbatch script for `spec` on the cluster described by `ctx`; RenderError when it cannot run there."""
    if not isinstance(spec, TrainingJobSpec | InferenceServiceSpec):
        raise TypeError(f"not a workload spec: {type(spec).__name__}")
    name = ctx.job_name or spec.name
    _check_context(ctx, name)
    check_env_names(spec.env)
    if spec.secret_env and not ctx.secrets_dir:
        raise RenderError(
            "secret_env",
            "this Slurm cluster keeps no secrets for jobs: set its connection secrets_dir (a directory of "
            "<secret>/<key> files on the compute nodes), or leave secret_env out",
        )
    if isinstance(spec, TrainingJobSpec):
        return _training(spec, ctx, name)
    if spec.disaggregation is not None:
        raise RenderError(
            "disaggregation",
            "prefill/decode pools run on Kubernetes only: a Slurm job runs one engine per replica, with no router in "
            "PD mode and no per-pool scaling; submit it to a Kubernetes cluster, or leave disaggregation out",
        )
    if spec.routing != "round-robin":
        raise RenderError(
            "routing",
            "cache-aware routing runs on Kubernetes only (the router finds the engines through the Kubernetes API); "
            "on Slurm each replica is its own job with its own address: use round-robin",
        )
    if spec.warm is not None:
        raise RenderError(
            "warm",
            "warm weights run on Kubernetes only (a Job fills a PersistentVolumeClaim the replicas mount): on Slurm "
            "use weights with a claim the cluster's volume_dirs maps to a shared directory already filled",
        )
    return _inference(spec, ctx, name)


def _check_context(ctx: SlurmContext, name: str) -> None:
    if not is_dns_label(name):
        raise RenderError("job_name", f"{name!r} is not a DNS-1123 label")
    for what in ("account", "qos", "partition"):
        value = getattr(ctx, what)
        if not isinstance(value, str) or not _SLURM_NAME.fullmatch(value):
            raise RenderError(what, f"{value!r} is not a Slurm name (lower-case letters, digits, '_' and '-')")
    for what in ("gres_type", "mig_gres_type"):
        value = getattr(ctx, what)
        if (value or what == "gres_type") and not _GRES_TYPE.fullmatch(value):
            raise RenderError(what, f"{value!r} is not a GRES type")
    problem = path_error(ctx.output_dir)
    if problem or "%" in ctx.output_dir:
        raise RenderError("output_dir", problem or "'%' would start a Slurm filename pattern")
    if not isinstance(ctx.rdzv_port, int) or not 1 <= ctx.rdzv_port <= 65535:
        raise RenderError("rdzv_port", f"{ctx.rdzv_port!r} is not a port")
    if ctx.fabric is not None and (problems := fabric_errors(ctx.fabric, "slurm")):
        field, message = problems[0]
        raise RenderError(f"fabric.{field}", message)


def slurm_time(seconds: int) -> str:
    """Slurm's days-hours:minutes:seconds."""
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"


def _directives(options: list[tuple[str, str]]) -> list[str]:
    lines = []
    for option, value in options:
        if not DIRECTIVE_VALUE.fullmatch(value):  # belt and braces: every value was validated upstream
            raise RenderError(option, f"{value!r} cannot go into an #SBATCH line")
        lines.append(f"#SBATCH --{option}={value}")
    return lines


def _common_options(spec: Spec, ctx: SlurmContext, name: str, nodes: str, gres: str) -> list[tuple[str, str]]:
    options = [
        ("job-name", name),
        ("account", ctx.account),
        ("qos", ctx.qos),
        ("partition", ctx.partition),
        ("nodes", nodes),
        ("ntasks-per-node", "1"),
        ("gres", gres),
    ]
    if spec.cpu:
        options.append(("cpus-per-task", str(spec.cpu)))
    if spec.memory_gib:
        options.append(("mem", f"{spec.memory_gib}G"))  # Slurm's G is GiB
    if spec.max_runtime_s:
        options.append(("time", slurm_time(spec.max_runtime_s)))
    return options


def _env_lines(env: dict[str, str]) -> list[str]:
    return [f"export {name}={sh_quote(value)}" for name, value in env.items()]


def _network(spec: Spec, ctx: SlurmContext, caveats: list[str]) -> tuple[NetworkPlan, list[str]]:
    """The pool's fabric for this job (network.py) and the script lines it adds; its caveats are appended.

    No `--network`: sbatch(1) gives it meaning on Cray's and HPE Slingshot's switch plugins only, not on InfiniBand
    or RoCE. RDMA registers (pins) memory, so the job needs an unlimited locked-memory limit; Slurm propagates the
    submitting process's limits to the job unless slurm.conf excludes MEMLOCK
    (PropagateResourceLimitsExcept=MEMLOCK, https://slurm.schedmd.com/faq.html#memlock): the script says so on
    stderr when the limit is not unlimited, where NCCL would otherwise fail to register memory."""
    plan = network_plan(spec, ctx.fabric)
    if not plan.transport:
        return plan, []
    nccl = ", ".join(f"{name}={value}" for name, value in plan.env.items())
    if plan.transport == "tcp":
        caveats.append(f"TCP ({plan.why}): NCCL talks over sockets ({nccl})")
        return plan, []
    caveats.append(f"RDMA ({plan.why}): {nccl}")
    if plan.slurm_gres:
        caveats.append(f"the fabric's GRES {plan.slurm_gres} is requested on every node beside the GPUs")
    caveats.append(
        "RDMA needs an unlimited locked-memory limit: slurm.conf PropagateResourceLimitsExcept=MEMLOCK keeps the "
        "submitting process's limit out of the job"
    )
    check = (
        '[ "$(ulimit -l)" = unlimited ] || echo "gpu-console: the locked-memory limit is $(ulimit -l) KiB: the NCCL '
        'RDMA transport needs it unlimited (slurm.conf PropagateResourceLimitsExcept=MEMLOCK)" >&2'
    )
    return plan, [check]


def _gres(gpus: str, plan: NetworkPlan) -> str:
    return f"{gpus},{plan.slurm_gres}" if plan.slurm_gres else gpus


def _secret_lines(spec: Spec, ctx: SlurmContext) -> list[str]:
    """secret_env: each variable read from `<secrets_dir>/<secret>/<key>` on the node when the job starts, so the
    value never passes through the console or the script; a missing file stops the job before it runs.

    Secret names are DNS subdomains and keys [-._a-zA-Z0-9] (never "." or ".."), so the path cannot leave
    secrets_dir; it is quoted all the same.
    """
    lines = []
    check_env_names({item.name: "" for item in spec.secret_env})
    for i, item in enumerate(spec.secret_env):
        if not is_dns_subdomain(item.secret) or not _SECRET_KEY.fullmatch(item.key) or item.key.startswith(".."):
            raise RenderError(f"secret_env[{i}]", f"{item.secret!r}/{item.key!r} is not a Secret name and key")
        path = sh_quote(f"{ctx.secrets_dir}/{item.secret}/{item.key}")
        fail = sh_quote(f"secret_env {item.name}: cannot read {ctx.secrets_dir}/{item.secret}/{item.key}")
        lines.append(f'{item.name}="$(cat -- {path})" || {{ echo {fail} >&2; exit 1; }}')
        lines.append(f"export {item.name}")
    return lines


def _header(kind: str, name: str, caveats: list[str]) -> list[str]:
    """Comments after the directives; caveats hold only the console's words and validated numbers."""
    lines = [
        "#",
        f"# {kind} {name}, rendered by the GPU console. Every value below is one shell-quoted word:",
        "# nothing a user typed is interpreted by the shell.",
    ]
    if caveats:
        lines += ["#", "# Caveats:", *comment_block(caveats).rstrip("\n").split("\n")]
    return lines


# --- training -------------------------------------------------------------------------------------------


def _training_gres(spec: TrainingJobSpec, ctx: SlurmContext, per_node: int) -> str:
    mode = spec.sharing.mode
    if mode == Sharing.WHOLE:
        return f"gpu:{ctx.gres_type}:{per_node}"
    if mode == Sharing.MIG:
        mig_type = ctx.mig_gres_type or f"{ctx.gres_type}_{spec.sharing.mig_profile}"
        if not _GRES_TYPE.fullmatch(mig_type):
            raise RenderError("sharing.mig_profile", f"{mig_type!r} is not a GRES type")
        return f"gpu:{mig_type}:1"
    if mode == Sharing.TIME_SLICE:
        return "shard:1"
    if mode == Sharing.MPS:
        return f"mps:{mps_count(spec.sharing.replicas)}"
    raise RenderError(
        "sharing.mode", "HAMi vGPUs exist on Kubernetes only; on Slurm use MIG, time-slice (shards) or MPS (gres/mps)"
    )


def mps_count(replicas: int | None) -> int:
    """gres/mps of one replica of a GPU split into `replicas`: exactly 100 / replicas, or RenderError. A share that
    is not a whole percentage would be rounded by Slurm's count: rounded up, `replicas` jobs no longer fit one
    GPU; rounded down, each gets less than the 1/replicas quota and chargeback count."""
    if not replicas or MPS_PER_GPU % replicas:
        exact = [n for n in range(2, 49) if MPS_PER_GPU % n == 0]
        raise RenderError(
            "sharing.replicas",
            f"on Slurm an MPS replica is gres/mps of {MPS_PER_GPU} per GPU (a percentage): {replicas} replicas "
            f"are not a whole percentage each; use {', '.join(map(str, exact))}",
        )
    return MPS_PER_GPU // replicas


def _training(spec: TrainingJobSpec, ctx: SlurmContext, name: str) -> RenderedScript:
    container, caveats = container_options(spec, ctx)
    one_node = spec.topology == Topology.NODE and spec.workers > 1
    if one_node and spec.sharing.mode != Sharing.WHOLE:
        raise RenderError("topology", "several shared-GPU workers on one node have no Slurm form; use topology any")
    if one_node:
        # Slurm places one torchrun per node: the gang on one node is one torchrun with all its GPUs, the
        # same world size (workers x GPUs per worker ranks).
        nodes, per_node, nproc = "1", spec.workers * spec.gpus_per_worker, spec.workers * spec.gpus_per_worker
        caveats.append(f"topology 'node': one node runs one torchrun with {nproc} processes (the whole gang)")
    else:
        per_node = spec.gpus_per_worker
        nproc = spec.gpus_per_worker if spec.sharing.mode == Sharing.WHOLE else 1
        nodes = f"{spec.elastic.min_workers}-{spec.elastic.max_workers}" if spec.elastic else str(spec.workers)
    plan, network_lines = _network(spec, ctx, caveats)
    options = _common_options(spec, ctx, name, nodes, _gres(_training_gres(spec, ctx, per_node), plan))
    options.append(("output", output_file(ctx.output_dir, name)))
    options.append(("requeue" if spec.retries else "no-requeue", ""))
    if spec.topology in (Topology.NVLINK, Topology.LEAF):
        options.append(("switches", "1"))  # all nodes under one leaf switch (topology/tree plugin)
        caveats.append(f"topology '{spec.topology}': --switches=1 needs Slurm's topology/tree plugin")
    if spec.sharing.mode == Sharing.TIME_SLICE:
        caveats.append(
            f"time-slice: one GRES shard per worker; the nodes must be configured with {spec.sharing.replicas} "
            "shards per GPU for that to be 1/replicas of a GPU"
        )
    if spec.sharing.mode == Sharing.MPS:
        caveats.append(
            f"MPS: gres/mps:{mps_count(spec.sharing.replicas)} per worker, {mps_count(spec.sharing.replicas)}% of "
            f"one GPU (1/{spec.sharing.replicas}); the nodes must have GresTypes mps with Count {MPS_PER_GPU} per "
            "GPU, a prolog that starts the MPS server, and gres/mps in AccountingStorageTRES for the usage to be "
            "metered. An MPS server serves one user: jobs of other users on the GPU are time-sliced with it"
        )
    if spec.retries:
        caveats.append("Slurm requeues the job on node failure or preemption; it has no per-job retry count")
    env = dict(plan.env)  # the spec's own env, after it, wins
    if spec.elastic:
        env["CHECKPOINT_PATH"] = spec.elastic.checkpoint_path
    env.update(spec.env)
    nnodes = f"{spec.elastic.min_workers}:{spec.elastic.max_workers}" if spec.elastic else '"$SLURM_NNODES"'
    endpoint = f'"$head_node:{ctx.rdzv_port}"'
    argv = torchrun_argv(spec, endpoint, '"$SLURM_JOB_ID"', "1" if one_node else nnodes, nproc=nproc)
    split = argv.index("--") + 1
    own, user = argv[:split], argv[split:]
    body = [
        "set -euo pipefail",
        "",
        *_env_lines(env),
        *_secret_lines(spec, ctx),
        *network_lines,
        'mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        'head_node="${nodes[0]}"',
        " ".join([_srun(container), *own]) + " " + sh_join(user),
    ]
    script = (
        "\n".join(["#!/bin/bash", *_directives_flags(options), *_header("Training job", name, caveats), *body]) + "\n"
    )
    preview = [*SRUN, *container, *(a.replace('"', "") for a in own), *user]
    return RenderedScript(script=script, argv_preview=preview, caveats=caveats)


def _directives_flags(options: list[tuple[str, str]]) -> list[str]:
    """Directives, where an empty value means a flag without one (--requeue)."""
    flags = [f"#SBATCH --{option}" for option, value in options if value == ""]
    return _directives([(o, v) for o, v in options if v != ""]) + flags


# --- inference ------------------------------------------------------------------------------------------


def _inference(spec: InferenceServiceSpec, ctx: SlurmContext, name: str) -> RenderedScript:
    container, caveats = container_options(spec, ctx)
    plan, network_lines = _network(spec, ctx, caveats)
    gres = _gres(f"gpu:{ctx.gres_type}:{spec.gpus_per_pod}", plan)
    options = _common_options(spec, ctx, name, str(spec.nodes_per_replica), gres)
    if spec.replicas > 1:
        options.append(("array", f"0-{spec.replicas - 1}"))  # one replica per array task
        options.append(("output", output_file(ctx.output_dir, name, "%A_%a")))
    else:
        options.append(("output", output_file(ctx.output_dir, name)))
    if spec.autoscaling.enabled:
        caveats.append("Slurm has no autoscaling: the job array runs the fixed replicas")
    caveats.append(
        f"scancel sends SIGTERM, which the script forwards to the engine; Slurm's KillWait (not the spec's "
        f"{spec.shutdown.drain_seconds} s drain) bounds how long in-flight requests get"
    )
    env = {**plan.env, **spec.env}
    if spec.weights and not container and not spec.model.startswith("/"):
        caveats.append("the weights volume is a Kubernetes PVC; on Slurm the model is read from the shared file system")
    lines = [
        "set -uo pipefail  # no -e: the script handles the engine's exit itself",
        "",
        *_env_lines(env),
        *_secret_lines(spec, ctx),
        *network_lines,
    ]
    lines.append(f"health_url=http://127.0.0.1:{spec.port}{HEALTH_PATH}")
    if spec.multi_node:
        lines += ['mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")', 'head_node="${nodes[0]}"']
    launch, preview = _launch(spec, container)
    lines += launch
    lines += _supervise(spec)
    script = "\n".join(
        ["#!/bin/bash", *_directives_flags(options), *_header("Inference service", name, caveats), *lines]
    )
    return RenderedScript(script=script + "\n", argv_preview=preview, caveats=caveats)


def _launch(spec: InferenceServiceSpec, container: list[str]) -> tuple[list[str], list[str]]:
    """Lines that start the engine in the background (pid in server_pid), and the engine step's argv."""
    if not spec.multi_node:
        argv = engine_argv(spec)
        return [_srun(container) + " " + sh_join(argv) + " &", "server_pid=$!"], [*SRUN, *container, *argv]
    if spec.engine == "sglang":
        # One task per node; each learns its rank from Slurm, the init address is the first host ($1).
        argv = engine_argv(spec, distributed=("$SLURM_NNODES", "$SLURM_NODEID", f"$head_node:{SGLANG_DIST_PORT}"))
        core = engine_argv(spec)[: len(engine_argv(spec)) - len(spec.extra_args)]
        inner = (
            "exec "
            + sh_join(core)
            + f' --nnodes "$SLURM_NNODES" --node-rank "$SLURM_NODEID" --dist-init-addr "$1:{SGLANG_DIST_PORT}"'
            + (" " + sh_join(spec.extra_args) if spec.extra_args else "")
        )
        line = _srun(container) + " bash -c " + sh_quote(inner) + ' bash "$head_node" &'
        return [line, "server_pid=$!"], [*SRUN, *container, *argv]
    if container:
        # The Ray head, its workers, the wait for them and vLLM are separate srun steps; in pyxis each would be
        # its own container, and the wait (ray.init(address="auto")) runs in the batch shell, outside any.
        raise RenderError(
            "tensor_parallel",
            f"{spec.gpus_per_replica} GPUs per replica span {spec.nodes_per_replica} nodes: multi-node vLLM (a Ray "
            'cluster across srun steps) has no rendering with containers: "pyxis"; use engine sglang, or a '
            "replica that fits one node",
        )
    # vLLM: a Ray head on the first node, Ray workers on the others, then vLLM on the head.
    overlap = ("srun", "--overlap", "--kill-on-bad-exit=1")
    worker = f'until ray start --address="$1:{RAY_PORT}" --disable-usage-stats --block; do sleep 5; done'
    argv = engine_argv(spec, ray=True)
    on_head = " ".join(overlap) + ' --nodes=1 --ntasks=1 --nodelist="$head_node"'
    lines = [
        f"{on_head} ray start --head --port={RAY_PORT} --disable-usage-stats --block &",
        " ".join(overlap)
        + ' --nodes="$((SLURM_NNODES - 1))" --ntasks="$((SLURM_NNODES - 1))" --exclude="$head_node" bash -c '
        + sh_quote(worker)
        + ' bash "$head_node" &',
        *ray_wait_for_nodes("SLURM_NNODES").rstrip("\n").split("\n"),
        f"{on_head} {sh_join(argv)} &",
        "server_pid=$!",
    ]
    return lines, [*overlap, "--nodes=1", "--ntasks=1", "--nodelist=$head_node", *argv]


def _supervise(spec: InferenceServiceSpec) -> list[str]:
    """Wait for /health within the loading budget; then live as long as the engine, failing when it stops."""
    budget, period = spec.readiness.initial_delay_s, spec.readiness.period_s
    return [
        "# scancel / preemption: pass SIGTERM on to the engine so it can finish in-flight requests.",
        'trap \'kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid"; exit 143\' TERM INT',
        f"deadline=$((SECONDS + {budget}))",
        'until curl -fsS -o /dev/null "$health_url"; do',
        '  if ! kill -0 "$server_pid" 2>/dev/null; then',
        '    wait "$server_pid"; status=$?',
        '    echo "gpu-console: the engine exited (status $status) before it became healthy" >&2',
        "    exit $(( status == 0 ? 1 : status ))",
        "  fi",
        "  if (( SECONDS >= deadline )); then",
        f'    echo "gpu-console: the engine was not healthy after {budget} s" >&2',
        '    kill -TERM "$server_pid"; wait "$server_pid"',
        "    exit 1",
        "  fi",
        f"  sleep {period}",
        "done",
        'echo "gpu-console: the engine is healthy at $health_url"',
        'wait "$server_pid"; status=$?',
        'echo "gpu-console: the engine stopped (status $status); a service is not meant to exit" >&2',
        "exit $(( status == 0 ? 1 : status ))",
    ]
