"""Which tenant's workload a backend name is, for the fleet's views (apps/fleet/owners.py)."""

from __future__ import annotations

import re

from apps.workloads.models import Workload

# Workload.run_name(): "wl<id>-<name>", or "wl<id>r<attempt>-<name>" for a requeued run; a pod adds "-<suffix>".
_RUN = re.compile(r"^wl(\d+)(?:r(\d+))?-")


def owners(names: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(cluster id, a job's or a pod's name) -> its workload's tenant id, for names that are one of the console's
    runs on that cluster (its run name, or a pod of it); anyone else's work is left out."""
    parsed = {}
    for cluster_id, name in names:
        match = _RUN.match(name)
        if match:
            parsed[(cluster_id, name)] = (int(match.group(1)), int(match.group(2) or 0))
    if not parsed:
        return {}
    rows = {
        pk: (cluster_id, workload_name, tenant_id)
        for pk, cluster_id, workload_name, tenant_id in Workload.objects.filter(
            pk__in={pk for pk, _attempt in parsed.values()}
        ).values_list("pk", "cluster_id", "name", "tenant_id")
    }
    out = {}
    for (cluster_id, name), (pk, attempt) in parsed.items():
        row = rows.get(pk)
        if row is None or row[0] != cluster_id:
            continue
        run = Workload(pk=pk, name=row[1]).run_name(attempt)
        if name == run or name.startswith(run + "-"):
            out[(cluster_id, name)] = row[2]
    return out
