"""The home page's read model: the fleet at a glance, for what the user may see.

Every panel is a fixed number of grouped queries, whatever the fleet's size: capacity and
fragmentation read one row per node (apps/fleet/capacity.py), the utilization heatmap is grouped in
SQL to at most about `HEATMAP_COLUMNS` columns, demand is one GROUP BY over admission claims, spend
one over the month's per-day usage rollup, incidents and the isolation budget come from the health
app's read model. Nothing loads a row per GPU, and nothing queries per node, tenant or pool. The two
figures that cost most and are the same for every viewer, the heatmap and every tenant's spend, are
kept per process for `OVERVIEW_CACHE_S` seconds (telemetry and metering refresh them every 15 and 60 s).

Fleet data (GPUs, telemetry, incidents, isolation) is visible to every role, as on the Fleet and
Health pages. Tenant data (allocation, pending demand, spend) is shown per tenant only for tenants
the user may view: other tenants' allocation is one "other tenants" line, their spend is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.db.models import F, Q, Sum
from django.utils import timezone

from apps.accounts.permissions import allowed_tenant_ids
from apps.accounts.roles import Action
from apps.backends.shares import SHARE_UNITS
from apps.core.refcache import cached
from apps.fleet.capacity import ModelCapacity, capacity_by_model
from apps.fleet.models import Cluster, Node
from apps.health import heatmap

HEATMAP_COLUMNS = heatmap.HEATMAP_COLUMNS  # about 8 px per column at 1440 px: more nodes than this share a column
TOP_TENANTS = 8
SEVERITIES = ("fatal", "critical", "warning", "info")


# GPUs by model and state, and fragmentation


@dataclass
class GpuStates:
    """One GPU model's GPUs split into four states that add up to its total."""

    model: str
    total: int
    allocated: int
    free: int
    cordoned: int  # out of service: on cordoned or not-ready nodes, or not allocatable, neither busy nor unhealthy
    unhealthy: int

    @classmethod
    def of(cls, cap: ModelCapacity) -> GpuStates:
        free = cap.free
        allocated = min(cap.allocated, cap.total)
        unhealthy = min(cap.unhealthy, cap.total - allocated)
        cordoned = max(cap.total - allocated - free - unhealthy, 0)
        return cls(cap.gpu_model, cap.total, allocated, free, cordoned, unhealthy)

    def share(self, n: int) -> float:
        return round(100 * n / self.total, 2) if self.total else 0.0

    @property
    def bars(self) -> list[tuple[str, int, float]]:
        """(state, GPUs, % of the model) in the stacked bar's order."""
        return [
            (s, getattr(self, s), self.share(getattr(self, s))) for s in ("allocated", "free", "cordoned", "unhealthy")
        ]


def gpu_states(capacity: list[ModelCapacity]) -> tuple[list[GpuStates], GpuStates]:
    """Per-model states and the fleet total (all zero for a fleet without GPU nodes)."""
    rows = [GpuStates.of(cap) for cap in capacity]
    total = GpuStates(
        "", *(sum(getattr(r, f) for r in rows) for f in ("total", "allocated", "free", "cordoned", "unhealthy"))
    )
    return rows, total


# Utilization heatmap


def utilization_heatmap(nodes, node_count: int, node_sets: dict | None = None) -> dict | None:
    """GPU utilization (%) by node and GPU index, from the last scrape, grouped in SQL into heatmap columns.

    Nodes are ordered by cluster and name. Up to `HEATMAP_COLUMNS` nodes, each node is a column; beyond
    that, runs of `group` consecutive nodes of one cluster share a column, and each cell is the mean
    of that GPU index over them (with min and max for the hover). Nodes whose exporter does not answer
    give no value (a gap), rather than their stale last readings. One query: with `node_sets` (per cluster,
    what `capacity_by_model` counted of its nodes), each cluster's cells as its last health cycle stored them
    while they hold (`apps/health/heatmap.py`), else computed from every node's health row.
    """
    if node_count == 0:
        return None
    group = heatmap.group_size(node_count, HEATMAP_COLUMNS)
    rows = heatmap.rows(nodes, group, node_sets)
    columns: dict[tuple[str, int], dict] = {}
    indexes: set[int] = set()
    total, readings = 0.0, 0
    for cluster, col, first, last, in_cluster, node_id, index, mean, low, high, count in rows:
        column = columns.setdefault(
            (cluster, col),
            {"first": first, "last": last, "nodes": min(group, in_cluster - col * group), "node": node_id, "cells": {}},
        )
        column["first"], column["last"] = min(column["first"], first), max(column["last"], last)
        if index is not None and count:
            indexes.add(index)
            column["cells"][index] = (round(mean, 1), round(low, 1), round(high, 1), count)
            total += mean * count
            readings += count
    ordered = sorted(columns.items(), key=lambda item: item[0])
    y = sorted(indexes) or [0]
    row_of = {index: i for i, index in enumerate(y)}
    x: list[str] = []
    ids: list[int | None] = []  # the node of each column, when a column is one node (a click opens its health page)
    nodes_per_column: list[int] = []
    clusters: list[dict] = []
    z = [[None] * len(ordered) for _ in y]
    spread = [[None] * len(ordered) for _ in y]
    for c, ((cluster, _col), column) in enumerate(ordered):
        label = column["first"] if column["nodes"] == 1 else f"{column['first']} … {column['last']}"
        x.append(f"{cluster} · {label}")
        nodes_per_column.append(column["nodes"])
        ids.append(column["node"] if group == 1 else None)
        if clusters and clusters[-1]["name"] == cluster:
            clusters[-1]["end"] = c
        else:
            clusters.append({"name": cluster, "start": c, "end": c})
        for index, (mean, low, high, count) in column["cells"].items():
            z[row_of[index]][c] = mean
            spread[row_of[index]][c] = [low, high, count]
    return {
        "x": x,
        "y": [str(i) for i in y],
        "z": z,
        "spread": spread,
        "nodes": nodes_per_column,
        "ids": ids,
        "clusters": clusters,
        "group": group,
        "columns": len(x),
        "has_data": readings > 0,
        "mean": round(total / readings, 1) if readings else None,
        "readings": readings,
    }


# Allocation and pending demand by tenant and GPU model


def _number(gpus: Fraction) -> int | float:
    return gpus.numerator if gpus.denominator == 1 else round(float(gpus), 9)


@dataclass
class DemandRow:
    """One line of the demand table. Sums are kept in share units (integers: `SHARE_UNITS` to a GPU) and given as
    exact GPUs (Fractions: a 1/7 MIG slice is 1/7 of a GPU) only when read: adding Fractions row by row cost the
    overview more than the rest of the panel."""

    label: str
    slug: str = ""
    units: dict[str, list[int]] = field(default_factory=dict)  # model -> [allocated, pending] share units
    tenants: int = 1

    def add_units(self, model: str, allocated: int, pending: int) -> None:
        cell = self.units.setdefault(model, [0, 0])
        cell[0] += allocated
        cell[1] += pending

    @property
    def cells(self) -> dict[str, list[Fraction]]:
        """model -> [allocated, pending] GPUs."""
        return {m: [Fraction(a, SHARE_UNITS), Fraction(p, SHARE_UNITS)] for m, (a, p) in self.units.items()}

    @property
    def total_units(self) -> int:
        return sum(a + p for a, p in self.units.values())

    @property
    def allocated(self) -> Fraction:
        return Fraction(sum(c[0] for c in self.units.values()), SHARE_UNITS)

    @property
    def pending(self) -> Fraction:
        return Fraction(sum(c[1] for c in self.units.values()), SHARE_UNITS)

    def row(self, models: list[str]) -> list[list[Fraction]]:
        return [
            [Fraction(a, SHARE_UNITS), Fraction(p, SHARE_UNITS)] for a, p in (self.units.get(m, (0, 0)) for m in models)
        ]


def demand_by_tenant(visible: set[int] | None) -> dict:
    """Admitted and pending GPUs per tenant and model (one grouped query over admission claims).

    The largest `TOP_TENANTS` visible tenants by demand get a row each; every other tenant, visible or
    not, is summed into one line, so totals are the fleet's.
    """
    from apps.tenancy.models import Admission, AdmissionState

    rows = (
        Admission.objects.filter(state__in=[AdmissionState.ADMITTED, AdmissionState.PENDING])
        .values("queue__tenant_id", "queue__tenant__name", "queue__tenant__slug", "gpu_model__name")
        .annotate(
            allocated=Sum("gpu_units", filter=Q(state=AdmissionState.ADMITTED), default=0),
            pending=Sum("gpu_units", filter=Q(state=AdmissionState.PENDING), default=0),
        )
        .values_list(
            "queue__tenant_id", "queue__tenant__name", "queue__tenant__slug", "gpu_model__name", "allocated", "pending"
        )
    )
    mine: dict[int, DemandRow] = {}
    others: dict[int, DemandRow] = {}
    models: set[str] = set()
    for tenant_id, name, slug, model, allocated_units, pending_units in rows:
        # Exact shares: a 1/7 MIG slice is 1/7 of a GPU here, as in quota and chargeback (`DemandRow`).
        models.add(model)
        if visible is None or tenant_id in visible:
            mine.setdefault(tenant_id, DemandRow(name, slug)).add_units(model, allocated_units, pending_units)
        else:
            others.setdefault(tenant_id, DemandRow("")).add_units(model, allocated_units, pending_units)
    ranked = sorted(mine.values(), key=lambda r: (-r.total_units, r.label))
    shown, rest = ranked[:TOP_TENANTS], ranked[TOP_TENANTS:]
    other = DemandRow("")
    for row in [*rest, *others.values()]:
        for model, (allocated, pending) in row.units.items():
            other.add_units(model, allocated, pending)
    other.tenants = len(rest) + len(others)
    total = DemandRow("")
    for row in [*shown, other]:
        for model, (allocated, pending) in row.units.items():
            total.add_units(model, allocated, pending)
    ordered_models = sorted(models)
    return {
        "models": ordered_models,
        "rows": [(r, r.row(ordered_models)) for r in shown],
        "other": (other, other.row(ordered_models)) if other.tenants else None,
        "total": (total, total.row(ordered_models)),
        "empty": not models,
    }


# Spend this month


def spend_this_month(visible: set[int] | None, tenants: dict[int, dict], now: datetime) -> dict:
    """Cost to date and month-end forecast of the top visible tenants (subtrees), with their budgets.
    `tenants`: `overview_tenants()`.

    The tenants listed are the visible ones whose parent is not visible (for platform roles: the
    organizations), each with its whole subtree's spend, as statements and budgets count it.
    """
    from apps.chargeback.budgets import RUN_RATE_WINDOW, forecast, subtree_spend
    from apps.chargeback.models import Period
    from apps.chargeback.periods import month_start, next_month
    from apps.chargeback.statements import money

    # This month, as metering names it; not read or created here (`subtree_spend` matches its start).
    start = month_start(now)
    period = Period(start=start, end=next_month(start))
    ids = set(tenants) if visible is None else visible & set(tenants)
    roots = [t for t in ids if tenants[t]["parent_id"] not in ids]
    paths = {t: info["path"] for t, info in tenants.items()}
    since = max(period.start, now - RUN_RATE_WINDOW)
    if settings.OVERVIEW_CACHE_S:
        # Every tenant's totals, shared by all viewers for a while; each viewer gets only their roots' rows.
        total, recent = cached(
            f"overview:spend:{period.label}:{since.date()}",
            lambda: subtree_spend(period, since, paths=paths),
            ttl=settings.OVERVIEW_CACHE_S,
        )
    else:  # read only the viewer's subtrees
        scope = None if visible is None else set(roots)
        total, recent = subtree_spend(period, since, tenant_ids=scope, paths=paths)
    ranked = sorted(roots, key=lambda t: (-total.get(t, Decimal(0)), tenants[t]["name"]))
    shown = ranked[:TOP_TENANTS]
    rows = []
    for tenant_id in shown:
        cost = total.get(tenant_id, Decimal(0))
        expected = forecast(cost, recent.get(tenant_id, Decimal(0)), period, now)
        amount = tenants[tenant_id]["budget"]  # read with the tenants (`overview_tenants`)
        rows.append(
            {
                "tenant": tenants[tenant_id],
                "cost": money(cost),
                "forecast": money(expected),
                "budget": amount,
                "used_pct": float(cost * 100 / amount) if amount else None,
                "forecast_pct": float(expected * 100 / amount) if amount else None,
            }
        )
    rest = ranked[TOP_TENANTS:]
    return {
        "period": period,
        "currency": settings.CHARGEBACK_CURRENCY,
        "rows": rows,
        "more": len(rest),
        "more_cost": money(sum((total.get(t, Decimal(0)) for t in rest), Decimal(0))),
        "total": money(sum((total.get(t, Decimal(0)) for t in roots), Decimal(0))),
        "empty": not any(total.get(t) for t in roots),
    }


# The whole page


def isolation_summary(budgets: list[dict]) -> dict:
    """The fleet's automatic isolation budget: nodes isolated in the window against the pools' limits."""
    at_limit = [b for b in budgets if b["limit"] and b["used"] >= b["limit"]]
    busiest = sorted(budgets, key=lambda b: (-(b["used"] / b["limit"] if b["limit"] else 0), str(b["pool"])))
    used = sum(b["used"] for b in budgets)
    limit = sum(b["limit"] for b in budgets)
    return {
        "used": used,
        "limit": limit,
        "pct": round(100 * used / limit, 1) if limit else 0.0,
        "pools": len(budgets),
        "at_limit": len(at_limit),
        "top": [b for b in busiest if b["used"]][:5],
    }


def overview_tenants() -> dict[int, dict]:
    """Every tenant by id: its name, slug, path, parent, whether archived and its monthly spend budget (one query;
    the budget is one-to-one). The overview reads them once for its panels, the switcher and the roles."""
    from apps.accounts.models import Tenant

    return {
        row["id"]: row
        for row in Tenant.objects.values("id", "name", "slug", "path", "parent_id", "archived_at")
        .annotate(budget=F("spend_budget__monthly_amount"))
        .order_by("path")
    }


def fleet_overview(user, current_tenant=None, now: datetime | None = None, tenants: dict | None = None) -> dict:
    """Everything the overview panels show, for `user` (narrowed to `current_tenant`'s subtree if given).
    `tenants`: `overview_tenants()`, when the caller has read it."""
    from apps.health.overview import incidents_and_isolation

    now = now or timezone.now()
    nodes = Node.objects.for_user(user, Action.VIEW)
    node_sets: dict[int, tuple[int, int, int]] = {}  # per cluster: what the stored heatmap cells hold for
    capacity = capacity_by_model(nodes, node_sets=node_sets)
    states, states_total = gpu_states(capacity)
    node_count = sum(c.nodes for c in capacity)
    visible = allowed_tenant_ids(user, Action.VIEW)
    tenants = overview_tenants() if tenants is None else tenants
    if current_tenant:
        subtree = {t for t, info in tenants.items() if info["path"].startswith(current_tenant.path)}
        visible = subtree if visible is None else visible & subtree
    incidents, budgets = incidents_and_isolation(nodes) if node_count else ([(s, 0) for s in SEVERITIES], [])
    # Every viewer sees the whole fleet (or none of it): one heatmap, shared for OVERVIEW_CACHE_S.
    heatmap = (
        cached(
            "overview:heatmap",
            lambda: utilization_heatmap(nodes, node_count, node_sets),
            ttl=settings.OVERVIEW_CACHE_S,
        )
        if node_count
        else None
    )
    return {
        "has_clusters": node_count > 0 or Cluster.objects.for_user(user, Action.VIEW).exists(),
        "node_count": node_count,
        "cluster_count": len(heatmap["clusters"]) if heatmap else 0,
        "allocated_pct": round(states_total.share(states_total.allocated)),
        "states": states,
        "states_total": states_total,
        "fragmentation": [c for c in capacity if c.total],
        "heatmap": heatmap,
        "demand": demand_by_tenant(visible),
        "scoped": visible is not None,
        "incidents": incidents,
        "incidents_open": sum(n for _, n in incidents),
        "worst_incidents": [(s, n) for s, n in incidents if n][:2],
        "isolation": isolation_summary(budgets),
        "spend": spend_this_month(visible, tenants, now),
    }


def as_json(data: dict) -> dict:
    """The overview as plain JSON types (what /api/v1/overview/ answers): the same numbers the page shows."""

    def states(s: GpuStates) -> dict:
        return {k: getattr(s, k) for k in ("total", "allocated", "free", "cordoned", "unhealthy")}

    def demand(row: DemandRow, models: list[str]) -> dict:
        cells = dict(zip(models, row.row(models), strict=True))
        # GPUs as JSON numbers: whole ones as integers, shares to 9 places (as chargeback stores them).
        return {m: {"allocated": _number(a), "pending": _number(p)} for m, (a, p) in cells.items() if a or p}

    d = data["demand"]
    spend = data["spend"]
    total = data["states_total"]
    return {
        "gpus": {
            **states(total),
            "nodes": data["node_count"],
            "clusters": data["cluster_count"],
            "by_model": [{"model": s.model, **states(s)} for s in data["states"]],
        },
        "fragmentation": [
            {
                "model": c.gpu_model,
                "gpus_per_node": c.gpus_per_node,
                "whole_free_nodes": c.whole_free_nodes,
                "largest_gang_nodes": c.largest_gang_leaf,
                "largest_gang_leaf_switch": c.largest_gang_leaf_switch,
                "largest_free_on_one_node": c.largest_free_on_one_node,
                "stranded": c.stranded,
            }
            for c in data["fragmentation"]
        ],
        "utilization": data["heatmap"],
        "demand": {
            "tenants": [{"tenant": r.slug, "name": r.label, "by_model": demand(r, d["models"])} for r, _ in d["rows"]],
            "other_tenants": (
                {"count": d["other"][0].tenants, "by_model": demand(d["other"][0], d["models"])} if d["other"] else None
            ),
            "total": demand(d["total"][0], d["models"]),
        },
        "incidents": {"open": data["incidents_open"], "by_severity": dict(data["incidents"])},
        "isolation": {k: data["isolation"][k] for k in ("used", "limit", "pools", "at_limit")},
        "spend": {
            "period": spend["period"].label,
            "currency": spend["currency"],
            "total": str(spend["total"]),
            "tenants": [
                {
                    "tenant": r["tenant"]["slug"],
                    "name": r["tenant"]["name"],
                    "cost_to_date": str(r["cost"]),
                    "forecast": str(r["forecast"]),
                    "monthly_budget": None if r["budget"] is None else str(r["budget"]),
                }
                for r in spend["rows"]
            ],
            "more_tenants": spend["more"],
            "more_tenants_cost": str(spend["more_cost"]),
        },
    }
