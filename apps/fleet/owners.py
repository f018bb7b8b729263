"""Whose work a fleet row names, and how much of it a user may read.

GPUs, nodes and incidents are shared by every tenant, but what runs on them is one tenant's: a GPU's
`allocated_to`, a DCGM reading's pod. Someone who may not view that tenant sees "another tenant's workload"
instead of its name; console-wide viewers (platform admins, on-call, global viewers) see every name.

The fleet sits below workloads in the layers, so it cannot read which tenant a backend name belongs to; the
workloads app registers that answer here (`register_owner_resolver`) in its AppConfig.ready. With nothing
registered no name is attributed, so everything but the console-wide view is masked (never widened).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.utils.translation import gettext as _

from apps.accounts.permissions import allowed_tenant_ids

# (cluster id, a backend's name for work: a job, a pod) -> the owning tenant's id, for the names it knows.
Resolver = Callable[[set[tuple[int, str]]], dict[tuple[int, str], int]]
_resolver: Resolver | None = None


def register_owner_resolver(resolver: Resolver) -> None:
    global _resolver
    _resolver = resolver


def other_tenants_work() -> str:
    return _("another tenant's workload")


def split_names(text: str) -> list[str]:
    """`Gpu.allocated_to` holds the names comma-joined."""
    return [name for name in (part.strip() for part in (text or "").split(",")) if name]


class WorkloadNames:
    """The names of work on fleet rows as one user may see them. Built once per answer for all the names in it
    (one query), then `shown(cluster_id, name)` per name."""

    def __init__(self, user, names: Iterable[tuple[int, str]]):
        tenant_ids = allowed_tenant_ids(user, "view")
        self._visible: set[tuple[int, str]] | None = None  # None: every name
        if tenant_ids is not None:
            wanted = {(cluster_id, name) for cluster_id, name in names if name}
            owners = _resolver(wanted) if _resolver is not None and wanted else {}
            self._visible = {pair for pair, tenant_id in owners.items() if tenant_id in tenant_ids}

    @classmethod
    def of_gpus(cls, user, gpus: Iterable) -> WorkloadNames:
        """For GPU rows (their node loaded): the names in `allocated_to` and in each MIG instance's."""
        pairs = []
        for gpu in gpus:
            cluster_id = gpu.node.cluster_id
            pairs += [(cluster_id, name) for name in split_names(gpu.allocated_to)]
            pairs += [(cluster_id, str(m.get("allocated_to") or "")) for m in gpu.mig_instances or []]
        return cls(user, pairs)

    def shown(self, cluster_id: int, name: str) -> str:
        if not name or self._visible is None or (cluster_id, name) in self._visible:
            return name
        return other_tenants_work()

    def allocated_to(self, gpu) -> str:
        """A GPU's `allocated_to` as shown: each name, or the mask (once, however many of them it hides)."""
        return ",".join(dict.fromkeys(self.shown(gpu.node.cluster_id, n) for n in split_names(gpu.allocated_to)))

    def mig_instances(self, gpu) -> list[dict]:
        return [
            {**m, "allocated_to": self.shown(gpu.node.cluster_id, str(m["allocated_to"]))}
            if m.get("allocated_to")
            else m
            for m in gpu.mig_instances or []
        ]
