"""Operation handlers for the fleet: "sync now", the quota push and the drift report run as visible operations."""

from apps.backends.base import BackendError
from apps.backends.registry import get_backend
from apps.backends.types import QuotaSpec
from apps.fleet.models import Cluster
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


def quota_specs(cluster: Cluster) -> list[QuotaSpec]:
    """The stored quota of every queue bound to `cluster`, in the backends' terms."""
    from apps.tenancy.desired_state import build_desired_state

    state = build_desired_state(cluster)
    return [
        QuotaSpec(q.tenant, q.name, line.gpu_model, line.guaranteed, line.borrow_limit, line.lend_limit, line.weight)
        for q in state.queues
        for line in q.quotas
    ]


@register("fleet.quota_push")
class PushQuotaOperation(OperationHandler):
    """Push the cluster's desired quota state (params: cluster_id, dry_run).

    With dry_run, only what would change is logged (Kubernetes asks the API server with dryRun=All).
    """

    action = "administer"

    def run(self) -> dict:
        cluster = Cluster.objects.get(pk=int(self.operation.params["cluster_id"]))
        backend = get_backend(cluster)
        try:
            if self.operation.params.get("dry_run"):
                if not hasattr(backend, "quota_plan"):
                    raise OperationFailed(f"{cluster.kind} clusters have no dry-run preview of a quota push")
                changes = backend.quota_plan(quota_specs(cluster))
                changed = [c for c in changes if c.action != "unchanged"]
                for change in changed:
                    self.log(f"would {change.describe()}")
                self.log(f"{len(changed)} of {len(changes)} objects would change")
                return {"would_change": len(changed), "unchanged": len(changes) - len(changed)}
            result = backend.push_quota(quota_specs(cluster))
        except BackendError as exc:
            raise OperationFailed(str(exc)) from exc
        for message in result.messages:
            self.log(message)
        self.log(f"{result.applied} applied, {result.unchanged} unchanged")
        return {"applied": result.applied, "unchanged": result.unchanged}


@register("fleet.quota_drift")
class QuotaDriftOperation(OperationHandler):
    """Compare what a Kubernetes cluster holds under the console's label with its desired quota state."""

    action = "operate"

    def run(self) -> dict:
        cluster = Cluster.objects.get(pk=int(self.operation.params["cluster_id"]))
        backend = get_backend(cluster)
        if not hasattr(backend, "quota_drift"):
            raise OperationFailed(f"drift reports are for Kubernetes clusters; {cluster.name} is {cluster.kind}")
        try:
            report = backend.quota_drift()
        except BackendError as exc:
            raise OperationFailed(str(exc)) from exc
        for line in report.lines():
            self.log(line)
        if report.clean:
            self.log("no drift: the cluster holds the desired quota objects and no others")
        return {"clean": report.clean, "missing": report.missing, "changed": report.changed, "extra": report.extra}
