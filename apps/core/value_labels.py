"""Stored codes the pages show as words (a node's state, a role, a runbook action), in the reader's language.

A page shows the code itself ("ready", "platform-admin", "drain") where English readers expect it; the
template filter `label` (apps/core/templatetags/console.py) looks the code up with its context here, so
English pages keep the code and other languages get its translation from the catalog. Each code is
marked below with pgettext_lazy (called by that name, so that makemessages extracts code and context);
tests/i18n/test_value_labels.py checks that every value of the sources below is marked, so a new state
cannot slip through untranslated.
"""

from __future__ import annotations

from django.utils import translation
from django.utils.translation import pgettext, pgettext_lazy

_MARKED: dict[str, list] = {}


def _mark(context: str, *codes) -> None:
    """Record lazily marked codes; pgettext_lazy here so that makemessages extracts code and context."""
    _MARKED.setdefault(context, []).extend(codes)


def marked() -> dict[str, set[str]]:
    """{context: the codes marked for it}, read untranslated."""
    with translation.override(None):
        return {context: {str(code) for code in codes} for context, codes in _MARKED.items()}


_mark(
    "role",
    pgettext_lazy("role", "platform-admin"),
    pgettext_lazy("role", "tenant-admin"),
    pgettext_lazy("role", "member"),
    pgettext_lazy("role", "on-call"),
    pgettext_lazy("role", "viewer"),
)
_mark(
    "permission",
    pgettext_lazy("permission", "view"),
    pgettext_lazy("permission", "submit"),
    pgettext_lazy("permission", "manage"),
    pgettext_lazy("permission", "operate"),
    pgettext_lazy("permission", "administer"),
)
_mark(
    "token status",
    pgettext_lazy("token status", "active"),
    pgettext_lazy("token status", "revoked"),
    pgettext_lazy("token status", "expired"),
)
_mark(
    "node state",
    pgettext_lazy("node state", "ready"),
    pgettext_lazy("node state", "not-ready"),
    pgettext_lazy("node state", "down"),
    pgettext_lazy("node state", "vanished"),
    pgettext_lazy("node state", "unknown"),
)
_mark(
    "gpu health",
    pgettext_lazy("gpu health", "healthy"),
    pgettext_lazy("gpu health", "warning"),
    pgettext_lazy("gpu health", "unhealthy"),
    pgettext_lazy("gpu health", "unknown"),
)
# Severities of rules and incidents, and a node's or GPU's worst severity now (ok, suspect, unknown).
_mark(
    "severity",
    pgettext_lazy("severity", "ok"),
    pgettext_lazy("severity", "info"),
    pgettext_lazy("severity", "warning"),
    pgettext_lazy("severity", "critical"),
    pgettext_lazy("severity", "fatal"),
    pgettext_lazy("severity", "suspect"),
    pgettext_lazy("severity", "unknown"),
)
_mark(
    "incident state",
    pgettext_lazy("incident state", "detected"),
    pgettext_lazy("incident state", "isolating"),
    pgettext_lazy("incident state", "isolated"),
    pgettext_lazy("incident state", "draining"),
    pgettext_lazy("incident state", "drained"),
    pgettext_lazy("incident state", "repairing"),
    pgettext_lazy("incident state", "validating"),
    pgettext_lazy("incident state", "resolved"),
    pgettext_lazy("incident state", "false-positive"),
)
_mark(
    "runbook action",
    pgettext_lazy("runbook action", "cordon"),
    pgettext_lazy("runbook action", "uncordon"),
    pgettext_lazy("runbook action", "drain"),
    pgettext_lazy("runbook action", "resume"),
    pgettext_lazy("runbook action", "request-reset"),
    pgettext_lazy("runbook action", "mark-rma"),
)
_mark(
    "operation status",
    pgettext_lazy("operation status", "pending"),
    pgettext_lazy("operation status", "running"),
    pgettext_lazy("operation status", "succeeded"),
    pgettext_lazy("operation status", "failed"),
)
_mark(
    "workload state",
    pgettext_lazy("workload state", "pending"),
    pgettext_lazy("workload state", "admitted"),
    pgettext_lazy("workload state", "running"),
    pgettext_lazy("workload state", "succeeded"),
    pgettext_lazy("workload state", "failed"),
    pgettext_lazy("workload state", "preempted"),
    pgettext_lazy("workload state", "cancelling"),
    pgettext_lazy("workload state", "cancelled"),
    pgettext_lazy("workload state", "rejected"),
)
_mark("workload kind", pgettext_lazy("workload kind", "training"), pgettext_lazy("workload kind", "inference"))
_mark(
    "admission state",
    pgettext_lazy("admission state", "pending"),
    pgettext_lazy("admission state", "admitted"),
    pgettext_lazy("admission state", "rejected"),
    pgettext_lazy("admission state", "released"),
)
_mark(
    "admission decision",
    pgettext_lazy("admission decision", "admit"),
    pgettext_lazy("admission decision", "borrow"),
    pgettext_lazy("admission decision", "reclaim"),
    pgettext_lazy("admission decision", "queue"),
    pgettext_lazy("admission decision", "reject"),
)
_mark(
    "telemetry source",
    pgettext_lazy("telemetry source", "simulator"),
    pgettext_lazy("telemetry source", "exporter"),
    pgettext_lazy("telemetry source", "prometheus"),
)
_mark(
    "wait grouping",
    pgettext_lazy("wait grouping", "tenant"),
    pgettext_lazy("wait grouping", "queue"),
    pgettext_lazy("wait grouping", "gpu_model"),
    pgettext_lazy("wait grouping", "tier"),
    pgettext_lazy("wait grouping", "hour"),
    pgettext_lazy("wait grouping", "day"),
)
_mark(
    "wait reason",
    pgettext_lazy("wait reason", "quota"),
    pgettext_lazy("wait reason", "capacity"),
    pgettext_lazy("wait reason", "fragmentation"),
    pgettext_lazy("wait reason", "backend unavailable"),
    pgettext_lazy("wait reason", "policy"),
    pgettext_lazy("wait reason", "other"),
)


def value_label(code, context: str) -> str:
    """The code in the active language (the code itself where the catalog has no translation, as in English)."""
    if code is None or code == "":
        return code
    return pgettext(context, str(code))


def sources() -> dict[str, list[str]]:
    """Where each context's codes come from, for the completeness test: {context: every code it must mark}."""
    from apps.accounts.roles import Action, Role
    from apps.fleet.models import GpuHealth, NodeState
    from apps.health.models import IncidentState, NodeStatus, Severity, SourceKind
    from apps.health.services.runbook import ACTIONS
    from apps.observability.reasons import CATEGORIES
    from apps.observability.waits import BUCKETS, GROUPS
    from apps.operations.models import OperationStatus
    from apps.tenancy.admission import Decision
    from apps.tenancy.models import AdmissionState
    from apps.workloads.models import WorkloadKind, WorkloadState

    return {
        "role": Role.values,
        "permission": Action.values,
        "node state": NodeState.values,
        "gpu health": GpuHealth.values,
        "severity": [*Severity.values, *NodeStatus.values],
        "incident state": IncidentState.values,
        "runbook action": list(ACTIONS),
        "operation status": OperationStatus.values,
        "workload state": WorkloadState.values,
        "workload kind": WorkloadKind.values,
        "admission state": AdmissionState.values,
        "admission decision": [d.value for d in Decision],
        "telemetry source": SourceKind.values,
        "wait grouping": [*GROUPS, *BUCKETS],
        "wait reason": list(CATEGORIES),
    }
