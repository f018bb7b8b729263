"""Health rules: the default rule set, parameter validation, and evaluation of one node's scrape. No Django.

Sources for the defaults are in reference/gpu-health-and-isolation.md: the XID classes follow NVIDIA's
catalog (gpud's buckets), the thresholds follow DCGM's health watches (volatile DBE > 0, row-remap
failure, retired pages ≥ 63, NVLink replay/recovery ≥ 1, NVLink CRC ≥ 100/s, PCIe replays > 8/min) and
Azure's handling of throttling (thermal slowdown and power brake are warnings).

Every finding carries a sentence that explains it on its own:
"DCGM_FI_DEV_XID_ERRORS = 79 on GPU 3 (UUID GPU-…) of node gpu-07 at 12:03:15".
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from apps.core.text import gettext_noop

SEVERITIES = ("info", "warning", "critical", "fatal")
ACTIONS = ("record", "alert", "cordon", "drain", "request-reset", "request-rma")
KINDS = ("xid", "threshold", "increase", "rate", "bitmask", "gpu-missing", "exporter-down", "hung-job")
OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "<": operator.lt,
    "<=": operator.le,
}
_OP_TEXT = {">": ">", ">=": "≥", "==": "=", "<": "<", "<=": "≤"}

XID = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
CLOCK_EVENTS = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"

# Shown per GPU on the node page and rolled up per minute (charts, idle-GPU accounting).
ROLLUP_METRICS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
)
DISPLAY_METRICS = (*ROLLUP_METRICS, "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_FB_FREE")
# Bytes per second over PCIe (on in dcgm-exporter's default counters) and NVLink (off by default): rolled up per
# minute too, so that the hung-job rule can judge a window of minutes from the rollups alone.
TRAFFIC_METRICS = (
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
    "DCGM_FI_PROF_NVLINK_TX_BYTES",
    "DCGM_FI_PROF_NVLINK_RX_BYTES",
)
FOLDED_METRICS = (*ROLLUP_METRICS, *TRAFFIC_METRICS)
HUNG_JOB = "hung-job"  # the kind, the default rule's key, and the prefix of its incidents' causes
HUNG_JOB_THEN = ("notify", "requeue", "cancel")


@dataclass(frozen=True)
class RuleSpec:
    """A rule as evaluation sees it (built from a Rule row or the defaults)."""

    key: str
    cause: str
    title: str
    kind: str
    params: dict
    severity: str
    action: str
    enabled: bool = True


def _xid_codes(*parts: int | tuple[int, int]) -> list[int]:
    codes: list[int] = []
    for part in parts:
        codes.extend(range(part[0], part[1] + 1) if isinstance(part, tuple) else [part])
    return codes


DEFAULT_RULES: tuple[RuleSpec, ...] = (
    RuleSpec(
        "xid-fatal",
        "xid",
        gettext_noop("Fatal XID: GPU off the bus, NVLink failure (reboot, then support)"),
        "xid",
        {"metric": XID, "codes": _xid_codes(61, 74, 79, (144, 150))},
        "fatal",
        "drain",
    ),
    RuleSpec(
        "xid-reset",
        "xid",
        gettext_noop("XID that needs a GPU reset (ECC, GSP, init, row-remap failure)"),
        "xid",
        {"metric": XID, "codes": _xid_codes(48, 62, 64, 95, 119, 120, 136, 140, 143, 155, 158)},
        "critical",
        "cordon",
    ),
    RuleSpec(
        "xid-application",
        "xid",
        gettext_noop("Application XID (isolates only when it repeats)"),
        "xid",
        {
            "metric": XID,
            "codes": _xid_codes(13, 31, 43, 45, 68, 94, 109),
            "repeat_count": 3,
            "repeat_severity": "critical",
            "repeat_action": "cordon",
        },
        "info",
        "record",
    ),
    RuleSpec(
        "xid-informational",
        "xid",
        gettext_noop("Informational XID (page retired, SBE interrupts)"),
        "xid",
        {"metric": XID, "codes": _xid_codes(63, 92, 121, 157)},
        "info",
        "record",
    ),
    RuleSpec(
        "ecc-dbe-volatile",
        "ecc-dbe",
        gettext_noop("Volatile double-bit ECC errors"),
        "threshold",
        {"metrics": ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"], "op": ">", "value": 0},
        "critical",
        "drain",
    ),
    RuleSpec(
        "row-remap-failure",
        "row-remap-failure",
        gettext_noop("Row remapping failed (RMA criterion once the field diagnostic confirms)"),
        "threshold",
        {"metrics": ["DCGM_FI_DEV_ROW_REMAP_FAILURE"], "op": ">", "value": 0},
        "critical",
        "request-rma",
    ),
    RuleSpec(
        "retired-pages",
        "retired-pages",
        gettext_noop("Retired pages at the limit (63)"),
        "threshold",
        {"metrics": ["DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_DBE"], "op": ">=", "value": 63},
        "critical",
        "request-rma",
    ),
    RuleSpec(
        "nvlink-replay-recovery",
        "nvlink",
        gettext_noop("NVLink replay or recovery errors"),
        "increase",
        {
            "metrics": ["DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"],
            "min_increase": 1,
        },
        "critical",
        "cordon",
    ),
    RuleSpec(
        "nvlink-crc",
        "nvlink",
        gettext_noop("NVLink CRC errors at 100/s or more"),
        "rate",
        {
            "metrics": [
                "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
            ],
            "per": "second",
            "op": ">=",
            "value": 100,
        },
        "critical",
        "cordon",
    ),
    RuleSpec(
        "pcie-replay",
        "pcie-replay",
        gettext_noop("PCIe replays above 8 per minute"),
        "rate",
        {"metrics": ["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"], "per": "minute", "op": ">", "value": 8},
        "warning",
        "alert",
    ),
    RuleSpec(
        "thermal-slowdown",
        "thermal",
        gettext_noop("Thermal slowdown (HW or SW thermal clock event)"),
        "bitmask",
        {"metric": CLOCK_EVENTS, "mask": 0x40 | 0x20},
        "warning",
        "alert",
    ),
    RuleSpec(
        "power-brake",
        "power-brake",
        gettext_noop("HW power brake slowdown"),
        "bitmask",
        {"metric": CLOCK_EVENTS, "mask": 0x80},
        "warning",
        "alert",
    ),
    RuleSpec(
        "gpu-missing",
        "gpu-missing",
        gettext_noop("A GPU of the node is missing from its exporter"),
        "gpu-missing",
        {},
        "critical",
        "cordon",
    ),
    RuleSpec(
        "exporter-down",
        "exporter-down",
        gettext_noop("The node's DCGM exporter stopped answering"),
        "exporter-down",
        {"after_failures": 2},
        "warning",
        "alert",
    ),
    RuleSpec(
        HUNG_JOB,
        HUNG_JOB,
        gettext_noop("Hung training job (its GPUs idle, or its heartbeat stopped)"),
        HUNG_JOB,
        {"window_minutes": 10, "util_below": 5, "traffic_below_mbps": 10, "then": "notify", "dump": False},
        "warning",
        "alert",
    ),
)

# Stored in English (a rule's title, an incident's title, reasons that name an incident) and shown in the reader's
# language by recognising these templates (apps/core/stored_text.py); a custom rule's title stays as written.
INCIDENT_TITLE = gettext_noop("%(rule)s on %(node)s")
JOB_INCIDENT_TITLE = gettext_noop("%(rule)s: %(job)s on %(node)s")
INCIDENT_REASON = gettext_noop("%(title)s (incident #%(incident)s)")
AUTOMATIC_REASON = gettext_noop("automatic: %(title)s (incident #%(incident)s)")
AUTOMATION_STARTED = gettext_noop("automation started %(kind)s as operation #%(operation)s")
OPERATION_DONE = gettext_noop("%(kind)s done (operation #%(operation)s)")
STORED_TEMPLATES = (
    INCIDENT_TITLE,
    JOB_INCIDENT_TITLE,
    INCIDENT_REASON,
    AUTOMATIC_REASON,
    AUTOMATION_STARTED,
    OPERATION_DONE,
    *(rule.title for rule in DEFAULT_RULES),
)
# "%(rule)s on %(node)s" would match many an English sentence: it counts only when `rule` is a default rule's title.
STORED_KNOWN = {"rule"}
STORED_PARAMS = {"node": r"\S+", "job": r"\S+", "incident": r"\d+", "operation": r"\d+", "kind": r"[\w.-]+"}


class RuleError(ValueError):
    """A rule's parameters are invalid: `field` names the parameter."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def _metric_list(params: dict, key: str = "metrics") -> list[str]:
    metrics = params.get(key)
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) and m for m in metrics):
        raise RuleError(key, "a non-empty list of metric names")
    return metrics


def _number(params: dict, key: str, *, minimum: float | None = None) -> float:
    value = params.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RuleError(key, "a number")
    if minimum is not None and value < minimum:
        raise RuleError(key, f"at least {minimum:g}")
    return float(value)


def validate(kind: str, params: dict, severity: str, action: str) -> None:
    """Raise RuleError unless the rule is well formed (the rule editor and the API show the message)."""
    if kind not in KINDS:
        raise RuleError("kind", f"one of: {', '.join(KINDS)}")
    if severity not in SEVERITIES:
        raise RuleError("severity", f"one of: {', '.join(SEVERITIES)}")
    if action not in ACTIONS:
        raise RuleError("action", f"one of: {', '.join(ACTIONS)}")
    if not isinstance(params, dict):
        raise RuleError("params", "an object")
    if kind == "xid":
        codes = params.get("codes")
        if not isinstance(codes, list) or not codes or not all(isinstance(c, int) and 0 < c < 1000 for c in codes):
            raise RuleError("codes", "a non-empty list of XID numbers (1 to 999)")
        if params.get("repeat_count") is not None:
            _number(params, "repeat_count", minimum=2)
            if params.get("repeat_severity", "critical") not in SEVERITIES:
                raise RuleError("repeat_severity", f"one of: {', '.join(SEVERITIES)}")
            if params.get("repeat_action", "cordon") not in ACTIONS:
                raise RuleError("repeat_action", f"one of: {', '.join(ACTIONS)}")
    elif kind == "threshold":
        _metric_list(params)
        _number(params, "value")
        if params.get("op", ">") not in OPS:
            raise RuleError("op", f"one of: {' '.join(OPS)}")
    elif kind == "increase":
        _metric_list(params)
        _number(params, "min_increase", minimum=1)
    elif kind == "rate":
        _metric_list(params)
        _number(params, "value", minimum=0)
        if params.get("per") not in {"second", "minute"}:
            raise RuleError("per", "second or minute")
        if params.get("op", ">=") not in OPS:
            raise RuleError("op", f"one of: {' '.join(OPS)}")
    elif kind == "bitmask":
        if not isinstance(params.get("metric"), str):
            raise RuleError("metric", "a metric name")
        mask = params.get("mask")
        if isinstance(mask, bool) or not isinstance(mask, int) or mask <= 0:
            raise RuleError("mask", "a positive integer bit mask")
    elif kind == "exporter-down":
        _number(params, "after_failures", minimum=1)
    elif kind == HUNG_JOB:
        validate_hung_job(params, action)


def validate_hung_job(params: dict, action: str) -> None:
    """window_minutes 1-1440, util_below 0-100 (%), traffic_below_mbps ≥ 0 (MB/s), then, dump; it only tells."""
    if action not in {"record", "alert"}:
        raise RuleError("action", "record or alert: a hung job is the job's problem, its node is not isolated")
    window = params.get("window_minutes", 10)
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= 1440:
        raise RuleError("window_minutes", "a whole number of minutes from 1 to 1440")
    if _number({"util_below": params.get("util_below", 5)}, "util_below", minimum=0) > 100:
        raise RuleError("util_below", "a percentage from 0 to 100")
    _number({"traffic_below_mbps": params.get("traffic_below_mbps", 10)}, "traffic_below_mbps", minimum=0)
    if params.get("then", "notify") not in HUNG_JOB_THEN:
        raise RuleError("then", f"one of: {', '.join(HUNG_JOB_THEN)}")
    if not isinstance(params.get("dump", False), bool):
        raise RuleError("dump", "true or false")
    unknown = sorted(set(params) - {"window_minutes", "util_below", "traffic_below_mbps", "then", "dump"})
    if unknown:
        raise RuleError(unknown[0], "not a parameter of this kind of rule")


@dataclass(slots=True)
class Finding:
    """One rule firing on one GPU (or the node, `gpu` empty). `text` explains it without the page around it."""

    rule: str
    cause: str
    title: str
    severity: str
    action: str
    text: str
    gpu: str = ""
    uuid: str = ""
    metric: str = ""
    value: float | None = None

    @property
    def key(self) -> str:
        return f"{self.rule}:{self.gpu}"

    def as_evidence(self, at: datetime, version: int) -> dict:
        return {
            "at": at.isoformat(timespec="seconds"),
            "rule": self.rule,
            "version": version,
            "gpu": self.gpu,
            "uuid": self.uuid,
            "metric": self.metric,
            "value": self.value,
            "text": self.text,
        }


def _fmt(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"


def _where(gpu: str, uuid: str, node: str, at: datetime) -> str:
    return f"on GPU {gpu} (UUID {uuid or 'unknown'}) of node {node} at {at:%H:%M:%S}"


# An evaluator sees one GPU: (node, gpu index, uuid, values now, values at the last scrape, seconds between, at).
GpuCheck = Callable[[str, str, str, dict, dict | None, float, datetime], Finding | None]


def _finding(rule: RuleSpec, text: str, gpu: str, uuid: str, metric: str, value, **override) -> Finding:
    return Finding(
        rule=rule.key,
        cause=override.get("cause", rule.cause),
        title=rule.title,
        severity=override.get("severity", rule.severity),
        action=override.get("action", rule.action),
        text=text,
        gpu=gpu,
        uuid=uuid,
        metric=metric,
        value=value,
    )


def _xid_check(rule: RuleSpec) -> GpuCheck:
    metric = rule.params.get("metric", XID)
    codes = frozenset(rule.params["codes"])
    repeat = rule.params.get("repeat_count")

    def check(node, gpu, uuid, now, before, seconds, at):
        code = now.get(metric)
        if code is None or int(code) not in codes:
            return None
        code = int(code)
        text = f"{metric} = {code} {_where(gpu, uuid, node, at)}"
        override = {"cause": f"xid-{code}"}
        if repeat:
            count = now.get(f"{XID_COUNT}:{code}")
            if count is not None and count >= repeat:
                text += f"; it repeated {_fmt(count)} times in the exporter's window (≥ {_fmt(repeat)})"
                override["severity"] = rule.params.get("repeat_severity", "critical")
                override["action"] = rule.params.get("repeat_action", "cordon")
        return _finding(rule, text, gpu, uuid, metric, code, **override)

    return check


def _sum(values: dict, metrics: list[str]) -> float | None:
    present = [values[m] for m in metrics if m in values]
    return sum(present) if present else None  # counters an exporter does not ship are tolerated


def _label(metrics: list[str], values: dict) -> str:
    return " + ".join(m for m in metrics if m in values)


def _threshold_check(rule: RuleSpec) -> GpuCheck:
    metrics, op = rule.params["metrics"], rule.params.get("op", ">")
    limit, compare = float(rule.params["value"]), OPS[op]

    def check(node, gpu, uuid, now, before, seconds, at):
        total = _sum(now, metrics)
        if total is None or not compare(total, limit):
            return None
        name = _label(metrics, now)
        text = f"{name} = {_fmt(total)} ({_OP_TEXT[op]} {_fmt(limit)}) {_where(gpu, uuid, node, at)}"
        return _finding(rule, text, gpu, uuid, name, total)

    return check


def _delta(now: dict, before: dict | None, metrics: list[str]) -> float | None:
    current = _sum(now, metrics)
    if current is None or before is None:
        return None
    previous = _sum(before, metrics)
    if previous is None:
        return None
    return current - previous if current >= previous else current  # a reset (reboot) starts from zero


def _increase_check(rule: RuleSpec) -> GpuCheck:
    metrics, minimum = rule.params["metrics"], float(rule.params.get("min_increase", 1))

    def check(node, gpu, uuid, now, before, seconds, at):
        delta = _delta(now, before, metrics)
        if delta is None or delta < minimum:
            return None
        name = _label(metrics, now)
        text = f"{name} rose by {_fmt(delta)} in {seconds:.0f} s (≥ {_fmt(minimum)}) {_where(gpu, uuid, node, at)}"
        return _finding(rule, text, gpu, uuid, name, delta)

    return check


def _rate_check(rule: RuleSpec) -> GpuCheck:
    metrics, op = rule.params["metrics"], rule.params.get("op", ">=")
    limit, compare = float(rule.params["value"]), OPS[op]
    per = rule.params["per"]
    scale = 60.0 if per == "minute" else 1.0

    def check(node, gpu, uuid, now, before, seconds, at):
        if seconds <= 0:
            return None
        delta = _delta(now, before, metrics)
        if delta is None:
            return None
        rate = delta / seconds * scale
        if not compare(rate, limit):
            return None
        name = _label(metrics, now)
        text = (
            f"{name} rose by {_fmt(delta)} in {seconds:.0f} s = {rate:.1f}/{per} "
            f"({_OP_TEXT[op]} {_fmt(limit)}/{per}) {_where(gpu, uuid, node, at)}"
        )
        return _finding(rule, text, gpu, uuid, name, round(rate, 3))

    return check


_BITS = {0x8: "HW slowdown", 0x20: "SW thermal", 0x40: "HW thermal", 0x80: "HW power brake", 0x4: "SW power cap"}


def _bitmask_check(rule: RuleSpec) -> GpuCheck:
    metric, mask = rule.params["metric"], int(rule.params["mask"])

    def check(node, gpu, uuid, now, before, seconds, at):
        value = now.get(metric)
        if value is None or not int(value) & mask:
            return None
        bits = ", ".join(f"{name} 0x{bit:x}" for bit, name in _BITS.items() if int(value) & mask & bit)
        bits = bits or f"mask 0x{mask:x}"
        text = f"{metric} = 0x{int(value):x} ({bits} set) {_where(gpu, uuid, node, at)}"
        return _finding(rule, text, gpu, uuid, metric, int(value))

    return check


_GPU_CHECKS = {
    "xid": _xid_check,
    "threshold": _threshold_check,
    "increase": _increase_check,
    "rate": _rate_check,
    "bitmask": _bitmask_check,
}


@dataclass
class CompiledRules:
    """The rules in force, ready to run: per-GPU checks, node checks, and the metric names they read."""

    version: int
    gpu_checks: list[GpuCheck] = field(default_factory=list)
    missing: RuleSpec | None = None
    exporter_down: RuleSpec | None = None
    hung_job: RuleSpec | None = None
    metrics: frozenset[str] = frozenset()
    # The counters the increase and rate rules compare with the previous scrape: all a cycle keeps of it.
    previous: frozenset[str] = frozenset()


def compile_rules(rules: Iterable[RuleSpec], version: int) -> CompiledRules:
    compiled = CompiledRules(version=version)
    metrics: set[str] = {*DISPLAY_METRICS, *TRAFFIC_METRICS}
    previous: set[str] = set()
    for rule in rules:
        if not rule.enabled:
            continue
        if rule.kind == HUNG_JOB:
            compiled.hung_job = rule  # judged once a minute from the rollups (apps/health/hung.py)
        elif rule.kind == "gpu-missing":
            compiled.missing = rule
        elif rule.kind == "exporter-down":
            compiled.exporter_down = rule
        else:
            compiled.gpu_checks.append(_GPU_CHECKS[rule.kind](rule))
            metrics.update(rule.params.get("metrics", []))
            if "metric" in rule.params:
                metrics.add(rule.params["metric"])
            if rule.kind == "xid" and rule.params.get("repeat_count"):
                metrics.add(XID_COUNT)
            if rule.kind in ("increase", "rate"):
                previous.update(rule.params["metrics"])
    compiled.metrics = frozenset(metrics)
    compiled.previous = frozenset(previous)
    return compiled


def evaluate_gpu(
    compiled: CompiledRules, node: str, gpu: str, uuid: str, now: dict, before: dict | None, seconds: float, at
) -> list[Finding]:
    out = []
    for check in compiled.gpu_checks:
        finding = check(node, gpu, uuid, now, before, seconds, at)
        if finding is not None:
            out.append(finding)
    return out


def missing_gpus(compiled: CompiledRules, node: str, expected: dict[str, str], seen: set[str], at) -> list[Finding]:
    """GPUs the inventory lists for the node (index → UUID) that the exporter did not report."""
    rule = compiled.missing
    if rule is None:
        return []
    return [
        _finding(
            rule,
            f"GPU {index} (UUID {uuid or 'unknown'}) is in the inventory of node {node} but missing from its "
            f"exporter at {at:%H:%M:%S}",
            index,
            uuid,
            "",
            None,
        )
        for index, uuid in sorted(expected.items(), key=lambda item: int(item[0]))
        if index not in seen
    ]


def exporter_down(compiled: CompiledRules, node: str, failures: int, error: str, at) -> list[Finding]:
    rule = compiled.exporter_down
    if rule is None or failures < int(rule.params.get("after_failures", 2)):
        return []
    text = (
        f"the exporter of node {node} did not answer {failures} scrapes in a row "
        f"(last: {error or 'no answer'}) at {at:%H:%M:%S}"
    )
    return [_finding(rule, text, "", "", "", None)]
