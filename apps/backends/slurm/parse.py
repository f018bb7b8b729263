"""Slurm's JSON (v0.0.38 shape, the same from `sinfo/squeue/sacct --json` and from slurmrestd) as console types."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from apps.backends.catalog import catalog_by_code
from apps.backends.render.workload.slurm import MPS_PER_GPU
from apps.backends.slurm.settings import CONSOLE_PREFIX, SlurmSettings
from apps.backends.types import BackendState, GpuInfo, NodeInfo, Placement, Taint, WorkloadStatus

# Job states (22.05's job_state / sacct state.current) -> the console's.
JOB_STATES = {
    "PENDING": BackendState.PENDING,
    "REQUEUED": BackendState.PENDING,
    "REQUEUE_HOLD": BackendState.PENDING,
    "REQUEUE_FED": BackendState.PENDING,
    "CONFIGURING": BackendState.RUNNING,
    "RUNNING": BackendState.RUNNING,
    "COMPLETING": BackendState.RUNNING,
    "RESIZING": BackendState.RUNNING,
    "SUSPENDED": BackendState.RUNNING,
    "STOPPED": BackendState.RUNNING,
    "SIGNALING": BackendState.RUNNING,
    "STAGE_OUT": BackendState.RUNNING,
    "COMPLETED": BackendState.SUCCEEDED,
    "FAILED": BackendState.FAILED,
    "TIMEOUT": BackendState.TIMED_OUT,  # "terminated upon reaching its time limit" (squeue(1), JOB STATE CODES)
    "NODE_FAIL": BackendState.FAILED,
    "OUT_OF_MEMORY": BackendState.FAILED,
    "BOOT_FAIL": BackendState.FAILED,
    "DEADLINE": BackendState.FAILED,
    "SPECIAL_EXIT": BackendState.FAILED,
    "CANCELLED": BackendState.CANCELLED,
    "REVOKED": BackendState.CANCELLED,
    "PREEMPTED": BackendState.PREEMPTED,
}
FINISHED_REASONS = {
    "TIMEOUT": "TIMEOUT: the job ran past its time limit",
    "NODE_FAIL": "NODE_FAIL: a node of the job failed",
    "OUT_OF_MEMORY": "OUT_OF_MEMORY: the job ran out of memory",
    "BOOT_FAIL": "BOOT_FAIL: a node failed to boot",
    "DEADLINE": "DEADLINE: the job missed its deadline",
    "PREEMPTED": "PREEMPTED: a higher-priority job took its resources",
}
# States whose reason carries the job's exit (the others say what happened: TIMEOUT, NODE_FAIL, ...).
EXIT_STATES = {"FAILED", "SPECIAL_EXIT"}
# Node base states that can run jobs; DRAIN and friends are flags on top.
READY_STATES = {"idle", "mixed", "allocated", "completing", "planned"}
DOWN_STATES = {"down", "error", "fail", "failing", "future"}
UNSCHEDULABLE_FLAGS = {"DRAIN", "DRAINING", "DRAINED", "FAIL", "MAINTENANCE", "RESERVED", "POWERED_DOWN"}
NOT_RESPONDING = "NOT_RESPONDING"
# Reasons slurmctld sets on its own (22.05: node_mgr.c, job_mgr.c, step_mgr.c, gres.c), as they begin; `sinfo -R`
# shows them with SlurmUser as the user (https://slurm.schedmd.com/sinfo.html#OPT_list-reasons). Any other
# reason not starting with the console's prefix was given by an administrator (scontrol update ... Reason=).
CONTROLLER_REASONS = (
    "Not responding",
    "Kill task failed",
    "Node unexpectedly rebooted",
    "Prolog error",
    "Epilog error",
    "Job env setup error",
    "batch job complete failure",
    "Low RealMemory",
    "Low CPUs",
    "Low socket*core*thread count",
    "Low TmpDisk",
    "CoreSpec differ",
    "reboot timed out",
    "SlurmdSpoolDir is full",
)
_GRES_COUNT_REASON = re.compile(r"^gres/\S+ count (?:reported lower than configured|too low)")
TAINT_FEATURE = "taint:"  # Slurm has no taints: the console keeps them as node features taint:<key>=<value>:<effect>

_GRES = re.compile(r"^gpu(?::(?P<type>[^:(]+))?:(?P<count>\d+)")
_IDX = re.compile(r"IDX:(?P<idx>[0-9,\-]+)")


def epoch(value) -> datetime | None:
    return datetime.fromtimestamp(value, tz=UTC) if isinstance(value, int) and value > 0 else None


def gpu_gres(gres: str) -> tuple[str, int]:
    """("a100", 8) from "gpu:a100:8(S:0-1),shard:8"; ("", n) for untyped GPUs; ("", 0) without GPUs."""
    for part in re.split(r",(?![^(]*\))", gres or ""):
        match = _GRES.match(part.strip())
        if match:
            return match["type"] or "", int(match["count"])
    return "", 0


def other_gres(gres: str) -> dict[str, int]:
    """{"gres/ib": 1} from "gpu:a100:8(S:0-1),ib:1": the node's GRES other than GPUs (and their shards), named as
    Slurm's TRES names them ("gres/<name>", "gres/<name>:<type>"), e.g. a fabric's."""
    out: dict[str, int] = {}
    for part in re.split(r",(?![^(]*\))", gres or ""):
        fields = part.strip().split("(")[0].split(":")
        if len(fields) < 2 or fields[0] in ("gpu", "shard", "mps") or not fields[-1].isdigit():
            continue
        out["gres/" + ":".join(fields[:-1])] = int(fields[-1])
    return dict(sorted(out.items()))


def indexes(text: str) -> list[int]:
    """[0, 1, 4] from "gpu:a100:3(IDX:0-1,4)"."""
    match = _IDX.search(text or "")
    if not match:
        return []
    out: list[int] = []
    for part in match["idx"].split(","):
        low, _, high = part.partition("-")
        if low.isdigit():
            out += range(int(low), int(high or low) + 1)
    return out


def hostnames(nodelist: str) -> list[str]:
    """gpu-[01-03],cpu-1 -> [gpu-01, gpu-02, gpu-03, cpu-1] (what `scontrol show hostnames` does)."""
    out: list[str] = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", nodelist or ""):
        match = re.fullmatch(r"(?P<head>[^\[]*)\[(?P<ranges>[^\]]*)\](?P<tail>.*)", item)
        if not match:
            out.append(item)
            continue
        for part in match["ranges"].split(","):
            low, _, high = part.partition("-")
            for n in range(int(low), int(high or low) + 1):
                out.append(f"{match['head']}{str(n).zfill(len(low))}{match['tail']}")
    return out


def drained_by_console(reason: str) -> bool:
    return reason.startswith(CONSOLE_PREFIX)


def set_by_controller(reason: str) -> bool:
    """A reason slurmctld set itself (a node that stopped responding, a failed prolog, a config mismatch)."""
    return reason.startswith(CONTROLLER_REASONS) or bool(_GRES_COUNT_REASON.match(reason))


def reason_source(node: dict) -> str:
    """Who took the node out of service: "console", "slurmctld", "admin", or "" when it is in service."""
    reason = node.get("reason") or ""
    if drained_by_console(reason):
        return "console"
    if set_by_controller(reason) or (not reason and NOT_RESPONDING in node_flags(node)):
        return "slurmctld"
    return "admin" if reason else ""


def state_reason(node: dict) -> str:
    """The node's reason as the console shows it: the console's own as it is, others prefixed by who set it."""
    reason = node.get("reason") or ""
    source = reason_source(node)
    if source in ("", "console"):
        return reason
    return f"{source}: {reason or 'not responding'}"


def node_flags(node: dict) -> set[str]:
    return {str(f).upper() for f in node.get("state_flags") or []}


def node_unschedulable(node: dict) -> bool:
    return bool(node_flags(node) & UNSCHEDULABLE_FLAGS) or str(node.get("state", "")).lower() in DOWN_STATES


def node_taints(node: dict) -> list[Taint]:
    taints = []
    for feature in (node.get("features") or "").split(","):
        if feature.startswith(TAINT_FEATURE):
            key_value, _, effect = feature.removeprefix(TAINT_FEATURE).rpartition(":")
            key, _, value = key_value.partition("=")
            taints.append(Taint(key, value, effect or "NoSchedule"))
    return taints


def node_info(node: dict, settings: SlurmSettings, allocations: dict[tuple[str, int], list[str]]) -> NodeInfo:
    name = node["name"]
    base = str(node.get("state", "")).lower()
    flags = node_flags(node)
    if base in DOWN_STATES:
        state = "down"
    elif base in READY_STATES and NOT_RESPONDING not in flags:
        state = "ready"
    else:
        state = "not-ready"
    gres_type, count = gpu_gres(node.get("gres", ""))
    model = settings.model_of(gres_type) if gres_type else ""
    memory = catalog_by_code().get(model, {}).get("memory_mib", 0)
    health = "unknown" if state != "ready" else "healthy"
    # Slurm allocates nothing on a node that is down or not responding: none of its GPUs is allocatable.
    # A drained node keeps them, as a cordoned Kubernetes node does: it is unschedulable, so it has no free
    # GPUs (Node.gpu_free), but its capacity is still the cluster's.
    allocatable = count if state == "ready" else 0
    gpus = []
    for index in range(count):
        holders = allocations.get((name, index), [])
        gpus.append(
            GpuInfo(
                index=index,
                uuid=f"slurm:{settings.cluster}:{name}:{index}",  # Slurm knows no GPU UUIDs; DCGM does
                model=gres_type or "gpu",
                memory_mib=memory,
                health=health,
                allocated_to=holders,
                allocated_fraction=1.0 if holders else 0.0,
            )
        )
    labels = {
        "slurm.schedmd.com/state": "+".join([base.upper(), *sorted(flags)]),
        "slurm.schedmd.com/partitions": ",".join(node.get("partitions") or []),
    }
    if source := reason_source(node):
        labels["slurm.schedmd.com/drained-by"] = source
    features = [f for f in (node.get("active_features") or "").split(",") if f and not f.startswith(TAINT_FEATURE)]
    if features:
        labels["slurm.schedmd.com/features"] = ",".join(features)
    partitions = node.get("partitions") or []
    return NodeInfo(
        name=name,
        state=state,
        state_reason=state_reason(node),
        unschedulable=node_unschedulable(node),
        labels=labels,
        taints=node_taints(node),
        pool=partitions[0] if partitions else "",
        gpu_model=model,
        gpu_allocatable=allocatable,
        cpu_cores=int(node.get("cpus") or 0),
        memory_mib=int(node.get("real_memory") or 0),
        gpus=gpus,
        extended_resources=other_gres(node.get("gres", "")),
    )


def job_placements(job: dict) -> list[Placement]:
    """Nodes and GPU indexes of a running job (squeue / REST: gres_detail is one entry per node, in order)."""
    nodes = hostnames(job.get("nodes") or "")
    details = job.get("gres_detail") or []
    return [Placement(node, indexes(details[i]) if i < len(details) else []) for i, node in enumerate(nodes)]


def raw_state(job: dict) -> str:
    """A job's Slurm state, from the controller's JSON (job_state) or accounting's (state.current)."""
    if "job_state" in job:
        return str(job.get("job_state") or "").upper()
    return str((job.get("state") or {}).get("current") or "").upper()


def wait_status(raw) -> str:
    """A job's exit as the controller holds it (squeue --json / slurmrestd `exit_code`: the raw wait status) in
    sacct's terms: 768 -> "exit code 3", 15 -> "signal 15" (sacct: 3:0 and 0:15)."""
    if not isinstance(raw, int) or raw < 0:
        return "exit code unknown"
    if raw & 0x7F:  # WIFSIGNALED: the low 7 bits are the signal
        return f"signal {raw & 0x7F}"
    return f"exit code {(raw >> 8) & 0xFF}"  # WEXITSTATUS


def sacct_exit(text: str) -> str | None:
    """sacct's ExitCode column ("3:0" = exit code 3, "0:15" = signal 15) in the console's words. As sacct
    shows it: 22.05's sacct prints an exit status of 128 or more less 128 (a job that exited 255 reads 127:0,
    seen on the local cluster; slurmdbd holds the raw 65280)."""
    code, sep, signal = text.strip().partition(":")
    if not sep or not code.isdigit() or not signal.isdigit():
        return None
    return f"signal {int(signal)}" if int(signal) else f"exit code {int(code)}"


def accounting_exit(job: dict) -> str:
    """A job's exit from sacct --json / slurmdb. 22.05 reports a normal exit there as SUCCESS with return code 0
    even for a job that exited 3 (sacct's text says 3:0), so only a signal is read from it; the backend reads
    other exit codes from sacct's text (`SlurmBackend._exit_codes`)."""
    exit_code = job.get("exit_code") or {}
    signal = (exit_code.get("signal") or {}).get("signal_id")
    if exit_code.get("status") == "SIGNALED" and isinstance(signal, int):
        return f"signal {signal}"
    return "exit code unknown"


def job_status(job: dict, backend_id: str, exit_text: str | None = None) -> WorkloadStatus:
    """A squeue / REST job as the console's status. The pending reason is Slurm's own (e.g. AssocGrpGRES).
    `exit_text` is the job's exit as sacct reports it, when accounting has the finished job: it wins over the
    controller's (a job that failed to launch reads 1 there, a signal, where sacct says exit code 1)."""
    raw = str(job.get("job_state", "")).upper()
    state = JOB_STATES.get(raw, BackendState.UNKNOWN)
    reason = ""
    if state == BackendState.PENDING:
        # state_description has the whole reason ("ReqNodeNotAvail, UnavailableNodes:gpu-03") when there is more.
        short = "" if job.get("state_reason") in (None, "None") else job["state_reason"]
        reason = job.get("state_description") or short
    elif state in (BackendState.FAILED, BackendState.PREEMPTED, BackendState.TIMED_OUT):
        reason = FINISHED_REASONS.get(raw) or f"{raw}: {exit_text or wait_status(job.get('exit_code'))}"
        if job.get("state_reason") not in (None, "", "None"):
            reason += f" ({job['state_reason']})"
    started = epoch(job.get("start_time")) if state != BackendState.PENDING else None
    finished = epoch(job.get("end_time")) if state.finished else None
    return WorkloadStatus(
        backend_id=backend_id,
        state=state,
        reason=reason,
        placements=job_placements(job) if state == BackendState.RUNNING else [],
        started_at=started,
        finished_at=finished,
        events=[f"Slurm job {job.get('job_id')}: {raw}"],
    )


def accounting_status(job: dict, backend_id: str, exit_text: str | None = None) -> WorkloadStatus:
    """A finished job from sacct / slurmdb (gone from the controller's memory); `exit_text` as in job_status."""
    raw = str((job.get("state") or {}).get("current", "")).upper()
    state = JOB_STATES.get(raw, BackendState.UNKNOWN)
    times = job.get("time") or {}
    reason = ""
    if state == BackendState.PENDING:
        reason = (job.get("state") or {}).get("reason") or ""
    elif state in (BackendState.FAILED, BackendState.PREEMPTED, BackendState.TIMED_OUT):
        reason = FINISHED_REASONS.get(raw) or f"{raw}: {exit_text or accounting_exit(job)}"
    return WorkloadStatus(
        backend_id=backend_id,
        state=state,
        reason=reason,
        started_at=epoch(times.get("start")) if state != BackendState.PENDING else None,
        finished_at=epoch(times.get("end")) if state.finished else None,
        events=[f"Slurm job {job.get('job_id')}: {raw} (from accounting)"],
    )


def allocations(jobs: list[dict]) -> dict[tuple[str, int], list[str]]:
    """(node, GPU index) -> names of the running jobs holding it."""
    held: dict[tuple[str, int], list[str]] = {}
    for job in jobs:
        if JOB_STATES.get(str(job.get("job_state", "")).upper()) != BackendState.RUNNING:
            continue
        for placement in job_placements(job):
            for index in placement.gpu_indexes:
                held.setdefault((placement.node, index), []).append(job.get("name", ""))
    return held


def gpu_tres(job: dict) -> tuple[str, float]:
    """(GRES type, GPUs) a job held, from accounting's tres.allocated: gres "gpu" (all types) and "gpu:<type>",
    or for an MPS job gres "mps" in hundredths of a GPU (see `mps_gpus`)."""
    return _gpus(
        (f"gres/{tres.get('name') or ''}", tres.get("count") or 0)
        for tres in (job.get("tres") or {}).get("allocated") or []
        if tres.get("type") == "gres"
    )


def tres_gpus(tres: str) -> tuple[str, float]:
    """(GRES type, GPUs) from the controller's tres_alloc_str "cpu=1,...,gres/gpu=2,gres/gpu:a100=2" (or an MPS
    job's "gres/mps=25")."""
    return _gpus(item.partition("=")[::2] for item in tres.split(","))


def _gpus(items) -> tuple[str, float]:
    """(GRES type, GPUs) from (TRES name, count) pairs: gres/gpu counts GPUs of every type, gres/gpu:<type> of one.
    A job holds gres/gpu or gres/mps, never both (https://slurm.schedmd.com/gres.html#MPS_Management): gres/mps
    counts MPS_PER_GPU per GPU, so its count over MPS_PER_GPU is the GPUs' worth the job held (when the site
    tracks gres/mps in AccountingStorageTRES)."""
    total, typed, mps = None, {}, 0.0
    for key, value in items:
        if key == "gres/gpu":
            total = float(value)
        elif key.startswith("gres/gpu:"):
            typed[key.removeprefix("gres/gpu:")] = float(value)
        elif key == "gres/mps":
            mps = float(value)
    gpus = total if total is not None else sum(typed.values())
    return next(iter(typed), ""), gpus or mps / MPS_PER_GPU
