"""Hung training jobs: once a minute per cluster, the `hung-job` rule judges every running training job.

A job is hung when either
- its current run started at least `window_minutes` ago and ALL of its allocated GPUs stayed below BOTH floors
  (DCGM_FI_DEV_GPU_UTIL < `util_below` %, PCIe + NVLink TX + RX < `traffic_below_mbps` MB/s) in EVERY minute
  of the window, as the minute rollups (NodeRollup) record them; a minute missing from the rollups of any of its
  GPUs is no evidence, and the job is not judged (never a finding on a gap). Or
- its spec sets `progress_timeout_minutes` and no heartbeat came for that long in its current run
  (POST /api/v1/workloads/{id}/heartbeat/): NCCL's spin kernels keep GPU_UTIL high while a collective is stuck,
  so the GPUs alone cannot tell such a hang.

Which GPUs a job holds comes from `Workload.placements` (node, GPU indexes), which reconcile copies from the
backend's own status of the run; the exporter's pod labels and the inventory's `Gpu.allocated_to` are copies
of the same thing taken at other moments, and a rollup minute keeps neither.

A hung job opens one incident on its lead node (its first placement's node) with cause `hung-job-<workload id>`,
linked to the job and its tenant only: one open incident per job, and the constraint of one open incident per
node and cause still holds (the cause names the job). It never isolates a node: the rule's action is record or
alert. Its `then` acts once per run: notify (the incident's notification), requeue or cancel through the
workloads' services (the system, audited once each); with `dump`, a stack dump of each of its pods goes on
the incident's timeline first (HUNG_JOB_DUMP_COMMAND, or the simulator's own answer).
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.audit.services import record_event
from apps.backends.registry import get_backend
from apps.fleet.models import Cluster, Gpu, Node
from apps.health.models import Incident, IncidentEvent, IncidentState, NodeHealth, NodeRollup
from apps.health.rules import HUNG_JOB, JOB_INCIDENT_TITLE, TRAFFIC_METRICS, RuleSpec
from apps.health.services.incidents import MAX_EVIDENCE, add_event
from apps.workloads.models import Workload, WorkloadKind, WorkloadState

logger = logging.getLogger(__name__)

UTIL = "DCGM_FI_DEV_GPU_UTIL"
DEFAULTS = {"window_minutes": 10, "util_below": 5, "traffic_below_mbps": 10, "then": "notify", "dump": False}
DUMP_MAX_PODS = 4  # stack dumps per hung job (the first workers'): enough to see where it is stuck
DUMP_MAX_CHARS = 900  # of each dump's output kept on the timeline (an event holds 1,000 characters)


@dataclass
class HungResult:
    cluster: str
    judged: int = 0
    hung: int = 0
    opened: int = 0
    not_judged: int = 0
    skipped: bool = False
    acted: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    hung: bool
    summary: str = ""
    evidence: list[dict] = field(default_factory=list)
    gpus: list[dict] = field(default_factory=list)  # the lead node's, as Incident.gpus


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def _run_start(workload: Workload) -> datetime | None:
    """When the current run started as the console saw it: first seen running, or admitted again since."""
    start = workload.started_at
    admission = workload.admission if workload.admission_id else None
    if start is not None and admission is not None and admission.admitted_at and admission.admitted_at > start:
        start = admission.admitted_at
    return start


def _gpus_of(workload: Workload) -> list[tuple[str, int]]:
    return [
        (p["node"], int(index)) for p in workload.placements or [] if p.get("node") for index in p.get("gpus") or []
    ]


def _job(workload: Workload) -> str:
    return f"{workload.tenant.slug}/{workload.name}"


def _owner(workload: Workload) -> str:
    return workload.created_by.get_username() if workload.created_by_id else "unknown"


def _mbps(value: float) -> str:
    return f"{value / 1e6:.3g} MB/s"


def judge_gpus(
    gpus: list[tuple[str, int]],
    rollups: dict[tuple[str, datetime], dict],
    minutes: list[datetime],
    util_below: float,
    traffic_below_bps: float,
) -> tuple[str, list[tuple[str, int, float, float | None]]]:
    """("hung" | "busy" | "no-evidence", per GPU (node, index, max util, max traffic or None)) over `minutes`.

    Busy as soon as one GPU reached a floor in one minute. A GPU-minute without a rollup (or without the
    utilization) is no evidence; traffic an exporter does not ship is judged on utilization alone (None)."""
    rows, gap = [], False
    for node, index in gpus:
        top_util, top_traffic = 0.0, None
        for minute in minutes:
            cell = (rollups.get((node, minute)) or {}).get(str(index))
            if not cell or UTIL not in cell:
                gap = True
                break
            top_util = max(top_util, float(cell[UTIL][2]))
            shipped = [cell[m][2] for m in TRAFFIC_METRICS if m in cell]
            if shipped:
                top_traffic = max(top_traffic or 0.0, float(sum(shipped)))  # the sum of each series' minute peak
        if top_util >= util_below or (top_traffic is not None and top_traffic >= traffic_below_bps):
            return "busy", []
        rows.append((node, index, top_util, top_traffic))
    return ("no-evidence" if gap or not gpus else "hung"), rows


def check_cluster(cluster_id: int, at: datetime | None = None) -> HungResult:
    """Judge every running training job of the cluster at `at` (now); open, keep or quiet their incidents."""
    from apps.health.services.rulesets import compiled_rules

    cluster = Cluster.objects.get(pk=cluster_id)
    at = at or timezone.now()
    result = HungResult(cluster=cluster.name)
    compiled = compiled_rules()
    rule = compiled.hung_job
    hung_now: set[str] = set()
    unsure: set[str] = set()
    if rule is None:
        result.skipped = True
    else:
        params = {**DEFAULTS, **rule.params}
        window = timedelta(minutes=int(params["window_minutes"]))
        end = _minute(at)  # the minute in progress is not rolled up yet
        minutes = [end - window + timedelta(minutes=i) for i in range(int(params["window_minutes"]))]
        workloads = list(
            Workload.objects.filter(cluster=cluster, kind=WorkloadKind.TRAINING, state=WorkloadState.RUNNING)
            .select_related("tenant", "created_by", "admission")
            .order_by("pk")
        )
        starts = {w.pk: _run_start(w) for w in workloads}
        candidates = [w for w in workloads if starts[w.pk] is not None and starts[w.pk] <= end - window]
        candidates = _not_busy_now(cluster, candidates, float(params["util_below"]))
        rollups = _rollups(cluster, {node for w in candidates for node, _ in _gpus_of(w)}, minutes[0], end)
        for workload in workloads:
            start = starts[workload.pk]
            if start is None:
                continue
            result.judged += 1
            verdict = _heartbeat_verdict(workload, start, at)
            if verdict is None and workload in candidates:
                verdict = _gpu_verdict(workload, start, rollups, minutes, params, at, unsure)
            if verdict is None:
                continue
            cause = f"{HUNG_JOB}-{workload.pk}"
            hung_now.add(cause)
            result.hung += 1
            incident, created = _open(rule, compiled.version, workload, verdict, at)
            result.opened += int(created)
            result.acted += _act(cluster, incident, workload, params, verdict)
        result.not_judged = len(unsure)
    _mark(cluster, hung_now, unsure, at)
    return result


def _not_busy_now(cluster: Cluster, workloads: list[Workload], util_below: float) -> list[Workload]:
    """Leave out jobs with a GPU at or above the utilization floor in the latest scrape (NodeHealth.gpu_util, a
    few bytes per node): busy jobs, the common case, cost no rollup reads. The rest are judged from the rollups."""
    nodes = {node for w in workloads for node, _ in _gpus_of(w)}
    if not nodes:
        return []
    latest = dict(
        NodeHealth.objects.filter(node__cluster=cluster, node__name__in=nodes).values_list("node__name", "gpu_util")
    )
    return [
        w
        for w in workloads
        if not any((latest.get(node) or {}).get(str(index), 0) >= util_below for node, index in _gpus_of(w))
    ]


def _rollups(cluster: Cluster, nodes: set[str], start: datetime, end: datetime) -> dict[tuple[str, datetime], dict]:
    if not nodes:
        return {}
    names = dict(Node.objects.filter(cluster=cluster, name__in=nodes).values_list("id", "name"))
    rows = NodeRollup.objects.filter(node_id__in=list(names), minute__gte=start, minute__lt=end)
    return {(names[node_id], minute): data for node_id, minute, data in rows.values_list("node_id", "minute", "data")}


def _uuids(cluster: Cluster, nodes: set[str]) -> dict[tuple[str, int], str]:
    rows = Gpu.objects.filter(node__cluster=cluster, node__name__in=nodes).values_list("node__name", "index", "uuid")
    return {(node, index): uuid for node, index, uuid in rows}


def _heartbeat_verdict(workload: Workload, start: datetime, at: datetime) -> Verdict | None:
    timeout = (workload.spec or {}).get("progress_timeout_minutes")
    if not timeout:
        return None
    beat = workload.last_heartbeat_at if workload.last_heartbeat_at and workload.last_heartbeat_at >= start else None
    since = beat or start
    if at - since < timedelta(minutes=int(timeout)):
        return None
    last = f"its last heartbeat came at {beat:%H:%M:%S}" if beat else "it sent no heartbeat in this run"
    summary = (
        f"Training job {_job(workload)} (#{workload.pk}, submitted by {_owner(workload)}, tenant "
        f"{workload.tenant.slug}) is running since {start:%H:%M:%S} and {last}: no progress for "
        f"{int((at - since).total_seconds() // 60)} minutes (progress_timeout_minutes = {timeout}) at {at:%H:%M:%S}"
    )
    evidence = {
        "at": at.isoformat(timespec="seconds"),
        "rule": HUNG_JOB,
        "gpu": "",
        "uuid": "",
        "metric": "last_heartbeat_at",
        "value": beat.isoformat(timespec="seconds") if beat else None,
        "text": summary,
    }
    return Verdict(True, summary, [evidence])


def _gpu_verdict(workload, start, rollups, minutes, params, at, unsure: set[str]) -> Verdict | None:
    gpus = _gpus_of(workload)
    util_below, traffic_mbps = float(params["util_below"]), float(params["traffic_below_mbps"])
    outcome, rows = judge_gpus(gpus, rollups, minutes, util_below, traffic_mbps * 1e6)
    if outcome == "no-evidence":
        unsure.add(f"{HUNG_JOB}-{workload.pk}")
    if outcome != "hung":
        return None
    first, last = minutes[0], minutes[-1] + timedelta(minutes=1)
    summary = (
        f"Training job {_job(workload)} (#{workload.pk}, submitted by {_owner(workload)}, tenant "
        f"{workload.tenant.slug}) is running since {start:%H:%M:%S}, but all its {len(gpus)} GPUs stayed below "
        f"{util_below:g} % {UTIL} and {traffic_mbps:g} MB/s of PCIe + NVLink traffic in every minute from "
        f"{first:%H:%M} to {last:%H:%M}"
    )
    uuids = _uuids(workload.cluster, {node for node, _ in gpus})
    evidence = [
        {
            "at": at.isoformat(timespec="seconds"),
            "rule": HUNG_JOB,
            "gpu": f"{node}/{index}",
            "uuid": uuids.get((node, index), ""),
            "metric": UTIL,
            "value": util,
            "text": (
                f"GPU {index} (UUID {uuids.get((node, index)) or 'unknown'}) of node {node}: at most {util:g} % "
                f"{UTIL} and "
                + (f"{_mbps(traffic)} PCIe + NVLink traffic" if traffic is not None else "no traffic series exported")
                + f" in {first:%H:%M}-{last:%H:%M}"
            ),
        }
        for node, index, util, traffic in rows
    ]
    lead = gpus[0][0]
    lead_gpus = [{"index": index, "uuid": uuids.get((node, index), "")} for node, index in gpus if node == lead]
    return Verdict(True, summary, [_summary_evidence(summary, at), *evidence][:MAX_EVIDENCE], lead_gpus)


def _summary_evidence(summary: str, at: datetime) -> dict:
    return {"at": at.isoformat(timespec="seconds"), "rule": HUNG_JOB, "gpu": "", "uuid": "", "text": summary}


def _open(rule: RuleSpec, version: int, workload: Workload, verdict: Verdict, at: datetime) -> tuple[Incident, bool]:
    """The job's open incident, opened now (notified, audited) or touched (still hung)."""
    from apps.health.services.notify import notify_incident

    cause = f"{HUNG_JOB}-{workload.pk}"
    for entry in verdict.evidence:
        entry["version"] = version
    gpus = _gpus_of(workload)
    lead = Node.objects.get(cluster_id=workload.cluster_id, name=gpus[0][0]) if gpus else None
    with transaction.atomic():
        incident = Incident.objects.select_for_update().open().filter(node__cluster_id=workload.cluster_id, cause=cause)
        incident = incident.first()
        if incident is None and lead is not None:
            try:
                with transaction.atomic():
                    incident = Incident.objects.create(
                        node=lead,
                        cause=cause,
                        rule_key=rule.key,
                        ruleset_version=version,
                        title=JOB_INCIDENT_TITLE % {"rule": rule.title, "job": _job(workload), "node": lead.name},
                        severity=rule.severity,
                        action=rule.action,
                        evidence=verdict.evidence,
                        gpus=verdict.gpus,
                        detected_at=at,
                        last_seen_at=at,
                    )
            except IntegrityError:  # another worker opened it a moment ago
                incident = Incident.objects.select_for_update().open().get(node=lead, cause=cause)
            else:
                incident.workloads.add(workload)
                incident.tenants.add(workload.tenant_id)
                add_event(incident, None, "detected", verdict.summary, to_state=IncidentState.DETECTED)
                record_event(
                    None,
                    "incident.open",
                    incident,
                    reason=verdict.summary,
                    after={"severity": incident.severity, "action": incident.action, "cause": cause},
                )
                notify_incident(incident, "opened", verdict.summary)
                return incident, True
        if incident is None:
            raise ValueError(f"workload {workload.pk} has no placement to put its incident on")
        Incident.objects.filter(pk=incident.pk).update(last_seen_at=at, clean_since=None, updated_at=timezone.now())
    return incident, False


def _act(cluster: Cluster, incident: Incident, workload: Workload, params: dict, verdict: Verdict) -> list[str]:
    """What the rule's `then` (and `dump`) do, once per run of the job: the timeline says what was done."""
    done = set(
        IncidentEvent.objects.filter(
            incident=incident, kind__startswith=f"{HUNG_JOB}.", message__contains=workload.backend_name
        ).values_list("kind", flat=True)
    )
    acted = []
    if params.get("dump") and f"{HUNG_JOB}.dump" not in done:
        for line in stack_dumps(cluster, workload):
            add_event(incident, None, f"{HUNG_JOB}.dump", line)
        acted.append("dump")
    then = params.get("then", "notify")
    if then in {"requeue", "cancel"} and f"{HUNG_JOB}.{then}" not in done:
        message = _requeue(incident, workload) if then == "requeue" else _cancel(incident, workload)
        add_event(incident, None, f"{HUNG_JOB}.{then}", message)
        acted.append(then)
    return acted


def _requeue(incident: Incident, workload: Workload) -> str:
    from apps.workloads.services.requeue import HUNG, requeue_workload

    run = workload.backend_name
    requeued = requeue_workload(None, workload, cause=HUNG, reason=f"hung (incident #{incident.pk})")
    if requeued is None:
        return f"run {run} was not requeued (not running any more, or no retries left)"
    return f"run {run} stopped and requeued as {requeued.backend_name} (requeue {requeued.requeues})"


def _cancel(incident: Incident, workload: Workload) -> str:
    from apps.workloads.services.submission import cancel_workload

    run = workload.backend_name
    cancelled = cancel_workload(None, workload, reason=f"cancelled: its run hung (incident #{incident.pk})")
    return f"run {run} cancelled ({cancelled.state})"


def _pods(cluster: Cluster, workload: Workload) -> list[tuple[str, str, str]]:
    """(namespace, pod, node) of the job's pods, from the exporter's pod labels on its GPUs (latest scrape)."""
    by_node: dict[str, set[int]] = defaultdict(set)
    for node, index in _gpus_of(workload):
        by_node[node].add(index)
    rows = NodeHealth.objects.filter(node__cluster=cluster, node__name__in=list(by_node)).values_list(
        "node__name", "gpus"
    )
    seen: dict[tuple[str, str], str] = {}
    for node, gpus in sorted(rows):
        for index in sorted(by_node[node]):
            gpu = (gpus or {}).get(str(index)) or {}
            if gpu.get("pod"):
                seen.setdefault((gpu.get("namespace", ""), gpu["pod"]), node)
    return [(namespace, pod, node) for (namespace, pod), node in seen.items()][:DUMP_MAX_PODS]


def _trim(text: str) -> str:
    text = text.strip()
    return text if len(text) <= DUMP_MAX_CHARS else text[: DUMP_MAX_CHARS - 1] + "…"


def stack_dumps(cluster: Cluster, workload: Workload) -> list[str]:
    """One timeline line per pod (at most DUMP_MAX_PODS): HUNG_JOB_DUMP_COMMAND run for it (no shell, with a
    timeout), or the backend's own dump (the simulator's) when no command is set."""
    command = getattr(settings, "HUNG_JOB_DUMP_COMMAND", "")
    pods = _pods(cluster, workload)
    if not pods:
        return [f"no stack dump of {workload.backend_name}: no pod of it seen on its GPUs"]
    lines = []
    for namespace, pod, node in pods:
        values = {"namespace": namespace, "pod": pod, "node": node, "job": workload.backend_name}
        head = f"stack dump of {namespace}/{pod} on {node} ({workload.backend_name})"
        if command:
            lines.append(f"{head}: {run_dump_command(command, values)}")
            continue
        text = get_backend(cluster).stack_dump(namespace, pod, node, workload.backend_name)
        lines.append(f"{head}: {_trim(text)}" if text else f"{head}: none (HUNG_JOB_DUMP_COMMAND is not set)")
    return lines


def run_dump_command(template: str, values: dict[str, str]) -> str:
    """Run the command template with {namespace} {pod} {node} {job} filled in per argument (no shell)."""
    argv = []
    for part in shlex.split(template):
        for key, value in values.items():
            part = part.replace("{" + key + "}", value)
        argv.append(part)
    timeout = getattr(settings, "HUNG_JOB_DUMP_TIMEOUT_S", 30)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)  # noqa: S603
    except subprocess.TimeoutExpired:
        return f"{argv[0]} did not finish within {timeout} s"
    except OSError as exc:
        return f"{argv[0]} could not run: {exc}"
    output = _trim((done.stdout or "") + (done.stderr or ""))
    return output if done.returncode == 0 else f"exit {done.returncode}: {output}"


def _mark(cluster: Cluster, hung_now: set[str], unsure: set[str], at: datetime) -> None:
    """Open hung-job incidents of the cluster: still hung ones are seen now; jobs no longer hung (moving again,
    requeued, cancelled, ended) go quiet, and housekeeping resolves them after HEALTH_QUIET_S. A job not judged
    for want of rollups proves nothing either way."""
    mine = Incident.objects.open().filter(node__cluster=cluster, rule_key=HUNG_JOB)
    if hung_now:
        mine.filter(cause__in=hung_now).update(last_seen_at=at, clean_since=None)
    mine.exclude(cause__in=hung_now | unsure).filter(clean_since__isnull=True).update(clean_since=at)
