"""Operation handlers for the fleet: "sync now" runs as a visible operation (the quota push and the drift report,
which need the tenancy desired state, are tenancy's: apps/tenancy/operation_handlers.py)."""

from apps.fleet.services import sync_inventory
from apps.operations.runner import OperationFailed, OperationHandler, register


@register("fleet.sync")
class SyncClusterOperation(OperationHandler):
    """Sync one cluster's inventory now (params: cluster_id)."""

    action = "operate"

    def run(self) -> dict:
        cluster_id = int(self.operation.params["cluster_id"])
        self.log("reading inventory from the backend")
        result = sync_inventory(cluster_id)
        if result.skipped:
            raise OperationFailed("Another sync of this cluster is running; try again when it finishes.")
        if not result.ok:
            raise OperationFailed(result.error)
        self.log(
            f"{result.nodes} nodes: {result.added} added, {result.updated} updated, "
            f"{result.unchanged} unchanged, {result.vanished} vanished in {result.duration_ms} ms"
        )
        return {
            "nodes": result.nodes,
            "added": result.added,
            "updated": result.updated,
            "unchanged": result.unchanged,
            "vanished": result.vanished,
            "duration_ms": result.duration_ms,
        }
