"""A checked, canonically ordered view of a DesiredState, shared by every renderer.

Renderers must give the same bytes for the same state whatever order the database returned rows in,
so everything here is sorted: tenants depth-first from the organizations, siblings by slug; queues in
tenant order, then by name; tiers by value, highest first. GPU models keep the state's order, because
Kueue tries a ClusterQueue's flavors in list order and that order is a choice the console made.

`build_plan` rejects what no backend can take (unknown tenants or GPU models, negative quotas, a lend
limit above the guarantee, cycles in the tenant tree) with a RenderError naming the field.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property

from apps.backends.render.desired import DesiredState, GpuModelRef, QueueSpec, QuotaLine, TenantSpec, TierSpec
from apps.backends.render.errors import RenderError
from apps.backends.render.names import require_dns_label
from apps.backends.render.pools import Pool, pools_of

# Kubernetes refuses user PriorityClasses above one billion (higher values are for system-* classes).
MAX_USER_PRIORITY = 1_000_000_000
INT32_MIN = -(2**31)
TIER_DESCRIPTION_MAX = 2048  # WorkloadPriorityClass.description maxLength in the Kueue CRD


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def queue_label(queue: QueueSpec) -> str:
    """How messages name a queue: "<tenant>/<queue>"."""
    return f"{queue.tenant}/{queue.name}"


def line_max(line: QuotaLine) -> int | None:
    """The most the queue may hold of this model: guarantee + borrow limit; None when borrowing is unlimited."""
    return None if line.borrow_limit is None else line.guaranteed + line.borrow_limit


def line_never_lent(line: QuotaLine) -> int:
    """The part of the guarantee never lent to others (Kueue nominalQuota - lendingLimit)."""
    return 0 if line.lend_limit is None else line.guaranteed - line.lend_limit


def queue_weight(queue: QueueSpec) -> float:
    """One fair-share weight for the queue.

    Kueue and Volcano weigh a whole queue, while the console keeps a weight per GPU model. The lines'
    weights are averaged, each counted by its guarantee (plainly when nothing is guaranteed), and
    rounded to three decimals so the rendered quantity is stable.
    """
    if not queue.quotas:
        return 1.0
    total = sum(line.guaranteed for line in queue.quotas)
    if total:
        mean = sum(line.weight * line.guaranteed for line in queue.quotas) / total
    else:
        mean = sum(line.weight for line in queue.quotas) / len(queue.quotas)
    return round(mean, 3)


@dataclass(frozen=True)
class Plan:
    """The state after checks, in canonical order, with the lookups every renderer needs."""

    state: DesiredState
    tenants: tuple[TenantSpec, ...]  # parents before children
    queues: tuple[QueueSpec, ...]  # tenant order, then name
    tiers: tuple[TierSpec, ...]  # highest value first
    models: dict[str, GpuModelRef]  # code -> model, in the state's order

    @cached_property
    def pools(self) -> dict[str, list[Pool]]:
        """GPU model code -> its pools on the cluster (Kubernetes renderers; see pools.py)."""
        return pools_of(self.state)

    @cached_property
    def tenant_by_slug(self) -> dict[str, TenantSpec]:
        return {t.slug: t for t in self.tenants}

    @cached_property
    def children(self) -> dict[str, tuple[str, ...]]:
        """Child tenant slugs per tenant, in canonical order."""
        out: dict[str, list[str]] = defaultdict(list)
        for tenant in self.tenants:
            if tenant.parent is not None:
                out[tenant.parent].append(tenant.slug)
        return {slug: tuple(kids) for slug, kids in out.items()}

    def lines(self, queue: QueueSpec) -> list[QuotaLine]:
        """The queue's quota lines in GPU-model order."""
        order = {code: i for i, code in enumerate(self.models)}
        return sorted(queue.quotas, key=lambda line: order[line.gpu_model])

    def queues_of(self, tenant: str) -> list[QueueSpec]:
        return [q for q in self.queues if q.tenant == tenant]

    def weight_caveats(self, queues: list[QueueSpec], backend: str) -> list[str]:
        """One caveat per queue whose per-model weights had to be collapsed into one."""
        out = []
        for queue in queues:
            weights = sorted({line.weight for line in queue.quotas})
            if len(weights) > 1:
                shown = ", ".join(f"{line.gpu_model}={line.weight:g}" for line in self.lines(queue))
                out.append(
                    f"Queue {queue_label(queue)}: {backend} weighs a whole queue, not each GPU model; the "
                    f"per-model weights ({shown}) are rendered as their guarantee-weighted mean "
                    f"{queue_weight(queue):g}."
                )
        return out


def build_plan(state: DesiredState) -> Plan:
    """Check the state and order it canonically; raise RenderError on the first problem found."""
    models = _check_models(state.gpu_models)
    tenants = _order_tenants(state.tenants)
    tiers = _check_tiers(state.tiers)
    position = {t.slug: i for i, t in enumerate(tenants)}
    seen: set[tuple[str, str]] = set()
    for queue in state.queues:
        if queue.tenant not in position:
            raise RenderError(f"queue {queue_label(queue)}: tenant", f"unknown tenant {queue.tenant!r}")
        require_dns_label(queue.name, f"queue {queue_label(queue)}: name")
        if (queue.tenant, queue.name) in seen:
            raise RenderError(f"queue {queue_label(queue)}", "appears twice in the desired state")
        seen.add((queue.tenant, queue.name))
        _check_quotas(queue, models)
    queues = tuple(sorted(state.queues, key=lambda q: (position[q.tenant], q.name)))
    return Plan(state=state, tenants=tenants, queues=queues, tiers=tiers, models=models)


def _check_models(gpu_models: tuple[GpuModelRef, ...]) -> dict[str, GpuModelRef]:
    models: dict[str, GpuModelRef] = {}
    for model in gpu_models:
        # Kubernetes-only rules for code and product_label live in kubernetes.py: Slurm uses neither.
        if model.code in models:
            raise RenderError(f"GPU model {model.code}", "appears twice in the desired state")
        models[model.code] = model
    return models


def _order_tenants(tenants: tuple[TenantSpec, ...]) -> tuple[TenantSpec, ...]:
    """Depth-first from the organizations, siblings by slug; rejects unknown parents and cycles."""
    by_slug: dict[str, TenantSpec] = {}
    for tenant in tenants:
        require_dns_label(tenant.slug, f"tenant {tenant.slug!r}: slug")
        if tenant.slug in by_slug:
            raise RenderError(f"tenant {tenant.slug}", "appears twice in the desired state")
        if not (math.isfinite(tenant.weight) and tenant.weight >= 0):
            raise RenderError(f"tenant {tenant.slug}: weight", f"{tenant.weight!r} is not a finite number >= 0")
        by_slug[tenant.slug] = tenant
    kids: dict[str | None, list[str]] = defaultdict(list)
    for tenant in by_slug.values():
        if tenant.parent is not None and tenant.parent not in by_slug:
            raise RenderError(f"tenant {tenant.slug}: parent", f"unknown tenant {tenant.parent!r}")
        kids[tenant.parent].append(tenant.slug)
    ordered: list[TenantSpec] = []
    stack = sorted(kids[None], reverse=True)
    while stack:
        slug = stack.pop()
        ordered.append(by_slug[slug])
        stack.extend(sorted(kids[slug], reverse=True))
    if len(ordered) != len(by_slug):
        stuck = sorted(set(by_slug) - {t.slug for t in ordered})
        raise RenderError("tenants " + ", ".join(stuck), "their parents form a cycle (no organization above them)")
    return tuple(ordered)


def _check_tiers(tiers: tuple[TierSpec, ...]) -> tuple[TierSpec, ...]:
    names: set[str] = set()
    for tier in tiers:
        require_dns_label(tier.name, f"tier {tier.name!r}: name")
        if tier.name.startswith("system-"):
            raise RenderError(f"tier {tier.name}: name", "names starting with 'system-' are reserved by Kubernetes")
        if tier.name in names:
            raise RenderError(f"tier {tier.name}", "appears twice in the desired state")
        names.add(tier.name)
        if isinstance(tier.value, bool) or not isinstance(tier.value, int):
            raise RenderError(f"tier {tier.name}: value", f"{tier.value!r} is not an integer")
        if not INT32_MIN <= tier.value <= MAX_USER_PRIORITY:
            raise RenderError(
                f"tier {tier.name}: value",
                f"{tier.value} is outside {INT32_MIN}..{MAX_USER_PRIORITY}, the range Kubernetes allows for "
                "user priority classes",
            )
        if len(tier.description) > TIER_DESCRIPTION_MAX:
            raise RenderError(f"tier {tier.name}: description", f"longer than {TIER_DESCRIPTION_MAX} characters")
    return tuple(sorted(tiers, key=lambda t: (-t.value, t.name)))


def _check_quotas(queue: QueueSpec, models: dict[str, GpuModelRef]) -> None:
    seen: set[str] = set()
    for line in queue.quotas:
        where = f"queue {queue_label(queue)}: quota {line.gpu_model}"
        if line.gpu_model not in models:
            raise RenderError(
                f"{where}: gpu_model", f"unknown GPU model; this cluster has {', '.join(models) or 'none'}"
            )
        if line.gpu_model in seen:
            raise RenderError(where, "the GPU model has two quota lines")
        seen.add(line.gpu_model)
        if not _is_count(line.guaranteed):
            raise RenderError(f"{where}: guaranteed", f"{line.guaranteed!r} is not an integer >= 0")
        for name in ("borrow_limit", "lend_limit", "per_user_limit"):
            value = getattr(line, name)
            if value is not None and not _is_count(value):
                raise RenderError(f"{where}: {name}", f"{value!r} is not an integer >= 0 (or empty)")
        if line.lend_limit is not None and line.lend_limit > line.guaranteed:
            raise RenderError(
                f"{where}: lend_limit",
                f"{line.lend_limit} is above the guarantee {line.guaranteed}; a queue lends only its own guarantee",
            )
        if not (isinstance(line.weight, int | float) and math.isfinite(line.weight) and line.weight >= 0):
            raise RenderError(f"{where}: weight", f"{line.weight!r} is not a finite number >= 0")
