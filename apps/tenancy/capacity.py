"""Unguaranteed capacity per cluster and GPU model, for the capacity page (platform admins).

What no queue bound to a cluster guarantees there is lendable to every queue on it (apps/tenancy/admission.py,
`Snapshot.unguaranteed`): this reads the same snapshot admission decides on, so the page shows what admission
will lend. A queue bound to two clusters counts on both (its guarantee may be claimed on either).
"""

from __future__ import annotations

from apps.accounts.permissions import has_perm
from apps.accounts.roles import Action
from apps.backends.shares import format_share


def unguaranteed_panel(request, cluster_name: str = "") -> dict | None:
    """Rows of (cluster, model, GPUs, guaranteed there, unguaranteed, borrowed from it now, free in it), or None for
    anyone but platform admins (guarantees across tenants are theirs to see)."""
    from apps.tenancy.snapshot import build_snapshot

    if not has_perm(request.user, Action.ADMINISTER):
        return None
    from apps.fleet.models import GpuModel

    snapshot, _tiers = build_snapshot()
    names = dict(GpuModel.objects.values_list("code", "name"))

    def show(units: float) -> str:
        return format_share(int(units), snapshot.unit)

    rows = []
    for (cluster, model), total in sorted(
        snapshot.capacity_total.items(), key=lambda item: (snapshot.cluster_names.get(item[0][0], ""), item[0][1])
    ):
        name = snapshot.cluster_names.get(cluster, str(cluster))
        if cluster_name and name != cluster_name:
            continue
        unguaranteed = snapshot.unguaranteed(cluster, model)
        rows.append(
            {
                "cluster": name,
                "model": names.get(model, model),
                "gpus": show(total),
                "guaranteed": show(snapshot.guaranteed_on(cluster, model)),
                "unguaranteed": show(unguaranteed),
                "borrowed": show(snapshot.pool_in_use(cluster, model)),
                "free": show(snapshot.pool_free(cluster, model)),
                "over": snapshot.pool_in_use(cluster, model) > unguaranteed,
            }
        )
    return {"rows": rows}
