"""Read models for the health pages: fleet-wide counts, budgets, one node's GPUs and sparkline series.

Each is a constant number of queries over node-level rows (one per node, never per sample).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from django.db.models import Count, Max, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy

from apps.fleet.models import Node, NodePool, NodeState
from apps.health.models import (
    SEVERITY_RANK,
    Incident,
    NodeHealth,
    NodeRollup,
    Rule,
    TelemetrySource,
)
from apps.health.rules import ROLLUP_METRICS

GPU_STATES = ("ok", "info", "warning", "critical", "fatal", "unknown")
SPARK_MINUTES = 60
# Column labels of the node health table; also the keys of its sparkline series (both read in the same language).
SHORT = {
    "DCGM_FI_DEV_GPU_UTIL": gettext_lazy("util %"),
    "DCGM_FI_DEV_FB_USED": gettext_lazy("FB used MiB"),
    "DCGM_FI_DEV_GPU_TEMP": gettext_lazy("temp °C"),
    "DCGM_FI_DEV_POWER_USAGE": gettext_lazy("power W"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": gettext_lazy("tensor active"),
}


def rule_severities() -> dict[str, str]:
    """{rule key: severity} of the rules in force."""
    from apps.health.services.rulesets import active_ruleset

    return dict(Rule.objects.filter(ruleset=active_ruleset()).values_list("key", "severity"))


def gpu_states(firing: list[str], severities: dict[str, str]) -> dict[str, str]:
    """{gpu index: worst severity firing on it} from a node's firing keys ("rule:gpu")."""
    out: dict[str, str] = {}
    for key in firing:
        rule, _, gpu = key.rpartition(":")
        severity = severities.get(rule, "warning")
        if gpu and SEVERITY_RANK.get(out.get(gpu), -1) < SEVERITY_RANK[severity]:
            out[gpu] = severity
    return out


SEVERITIES = ("fatal", "critical", "warning", "info")


def open_incidents_by_severity(nodes) -> list[tuple[str, int]]:
    """[(severity, open incidents on `nodes`)], worst first, every severity listed (one grouped query)."""
    rows = Incident.objects.open().filter(node__in=nodes).values_list("severity").annotate(n=Count("id"))
    by_severity = dict(rows.values_list("severity", "n"))
    return [(s, by_severity.get(s, 0)) for s in SEVERITIES]


def isolation_budgets(nodes) -> list[dict]:
    """Each pool of `nodes`: nodes isolated automatically in the budget window, the limit, its size and policy.

    Pool sizes and use are one grouped query over `nodes`; the pools with their policies one more.
    """
    from apps.health.services.isolation import BUDGET_WINDOW, budget_limit, default_policy

    since = timezone.now() - BUDGET_WINDOW
    counts = {
        pool_id: (size, used)
        for pool_id, size, used in nodes.filter(pool__isnull=False)
        .values("pool_id")
        .annotate(
            size=Count("id", filter=~Q(state=NodeState.VANISHED), distinct=True),
            used=Count("incidents__node_id", filter=Q(incidents__auto_isolated_at__gte=since), distinct=True),
        )
        .filter(size__gt=0)
        .values_list("pool_id", "size", "used")
    }
    default = None
    budgets = []
    for pool in NodePool.objects.filter(id__in=counts).select_related("cluster", "isolation_policy"):
        policy = getattr(pool, "isolation_policy", None)
        if policy is None:
            default = default or default_policy()
            policy = default
        size, used = counts[pool.pk]
        budgets.append(
            {"pool": pool, "used": used, "limit": budget_limit(policy, size), "nodes": size, "policy": policy}
        )
    return budgets


def incidents_and_isolation(nodes) -> tuple[list[tuple[str, int]], list[dict]]:
    """`open_incidents_by_severity` and `isolation_budgets` of `nodes` in one grouped statement, for the overview.

    Per pool (nodes without a pool are one more group): its size, the nodes isolated automatically in the budget
    window, its open incidents by severity, its name and cluster's, and the limits of its own policy and of the
    default policy (scalar subqueries). Budgets are given as the pool's label ("cluster/pool"), its use and limit.
    Only a console whose default policy was never seeded reads it once more (`default_policy` seeds it).
    """
    from django.db.models import Subquery

    from apps.health.models import CLOSED_STATES, IsolationPolicy
    from apps.health.services.isolation import BUDGET_WINDOW, budget_limit, default_policy

    since = timezone.now() - BUDGET_WINDOW
    default = IsolationPolicy.objects.filter(pool__isnull=True)
    is_open = ~Q(incidents__state__in=CLOSED_STATES)
    rows = (
        nodes.order_by()
        .values("pool_id", "pool__name", "pool__cluster__name")
        .annotate(
            size=Count("id", filter=~Q(state=NodeState.VANISHED), distinct=True),
            used=Count("incidents__node_id", filter=Q(incidents__auto_isolated_at__gte=since), distinct=True),
            # Each incident is one row of the node-to-incident join (the pool, its cluster and policy are one row
            # each): counted without DISTINCT, which would sort the rows once per severity.
            **{f"open_{s}": Count("incidents__id", filter=is_open & Q(incidents__severity=s)) for s in SEVERITIES},
            own_id=Max("pool__isolation_policy__id"),
            own_nodes=Max("pool__isolation_policy__max_nodes_per_hour"),
            own_percent=Max("pool__isolation_policy__max_percent_per_hour"),
            default_nodes=Subquery(default.values("max_nodes_per_hour")[:1]),
            default_percent=Subquery(default.values("max_percent_per_hour")[:1]),
        )
    )
    budgets = []
    by_severity = Counter()
    seeded = None
    for row in rows:
        for s in SEVERITIES:
            by_severity[s] += row[f"open_{s}"]
        if row["pool_id"] is None or not row["size"]:
            continue
        if row["own_id"] is not None:
            limits = IsolationPolicy(max_nodes_per_hour=row["own_nodes"], max_percent_per_hour=row["own_percent"])
        elif row["default_nodes"] is not None:
            limits = IsolationPolicy(
                max_nodes_per_hour=row["default_nodes"], max_percent_per_hour=row["default_percent"]
            )
        else:  # the default policy is seeded on first use, as `isolation_budgets` does
            seeded = seeded or default_policy()
            limits = seeded
        budgets.append(
            {
                "pool": f"{row['pool__cluster__name']}/{row['pool__name']}",
                "used": row["used"],
                "limit": budget_limit(limits, row["size"]),
                "nodes": row["size"],
            }
        )
    return [(s, by_severity[s]) for s in SEVERITIES], budgets


def fleet_summary(nodes) -> dict:
    """GPUs by health state, nodes by status, open incidents by severity, isolation budget per pool."""
    severities = rule_severities()
    gpus: Counter = Counter()
    statuses: Counter = Counter()
    health = {
        node_id: (status, firing, exporter_up)
        for node_id, status, firing, exporter_up in NodeHealth.objects.filter(node__in=nodes).values_list(
            "node_id", "status", "firing", "exporter_up"
        )
    }
    for node_id, gpu_count in nodes.exclude(state=NodeState.VANISHED).values_list("id", "gpu_count"):
        status, firing, up = health.get(node_id, ("unknown", [], False))
        statuses[status] += 1
        if not up:
            gpus["unknown"] += gpu_count
            continue
        bad = gpu_states(firing, severities)
        gpus["ok"] += gpu_count - len(bad)
        for severity in bad.values():
            gpus[severity] += 1
    open_incidents = Incident.objects.open().filter(node__in=nodes)
    return {
        "gpus": [(state, gpus.get(state, 0)) for state in GPU_STATES],
        "statuses": sorted(statuses.items()),
        "incidents_by_severity": open_incidents_by_severity(nodes),
        "budgets": isolation_budgets(nodes),
        "sources": TelemetrySource.objects.select_related("cluster"),
        "open_incidents": open_incidents.select_related("node__cluster")[:15],
    }


def node_gpus(node: Node) -> tuple[NodeHealth | None, list[dict]]:
    """The node's GPUs with their latest readings, what fires on each, and sparkline series (last hour)."""
    health = NodeHealth.objects.filter(pk=node.pk).first()
    severities = rule_severities()
    firing: dict[str, list[str]] = {}
    for key in health.firing if health else []:
        rule, _, gpu = key.rpartition(":")
        firing.setdefault(gpu, []).append(rule)
    states = gpu_states(health.firing, severities) if health else {}
    since = timezone.now() - timedelta(minutes=SPARK_MINUTES)
    series: dict[str, dict[str, list]] = {}
    for minute, data in (
        NodeRollup.objects.filter(node=node, minute__gte=since).order_by("minute").values_list("minute", "data")
    ):
        stamp = minute.strftime("%H:%M")
        for index, metrics in data.items():
            per = series.setdefault(index, {})
            for metric, (_low, avg, _high) in metrics.items():
                cell = per.setdefault(metric, {"x": [], "y": []})
                cell["x"].append(stamp)
                cell["y"].append(avg)
    rows = []
    for index, gpu in sorted((health.gpus if health else {}).items(), key=lambda item: int(item[0])):
        values = gpu.get("v", {})
        rows.append(
            {
                "index": index,
                "uuid": gpu.get("uuid", ""),
                "pod": gpu.get("pod", ""),
                "namespace": gpu.get("namespace", ""),
                "mig": gpu.get("mig", []),
                "state": states.get(index, "ok"),
                "firing": firing.get(index, []),
                "xid": values.get("DCGM_FI_DEV_XID_ERRORS"),
                "latest": [(str(SHORT[m]), values.get(m)) for m in ROLLUP_METRICS],
                "series": {str(SHORT[m]): series.get(index, {}).get(m, {"x": [], "y": []}) for m in ROLLUP_METRICS},
            }
        )
    return health, rows
