"""Operation handlers for a cluster's quota: the push and the drift report, run as visible operations.

Tenancy builds the cluster's desired state from its tables (`build_desired_state`) and hands it to the
backend, which renders it in its own terms. The kinds were "fleet.quota_push" and "fleet.quota_drift" before
tenancy owned them; the operations app's migration 0004 renamed the stored rows.
"""

from __future__ import annotations

from apps.backends.base import BackendError
from apps.backends.registry import get_backend
from apps.fleet.models import Cluster
from apps.operations.runner import OperationFailed, OperationHandler, register
from apps.tenancy.desired_state import build_desired_state


@register("tenancy.quota-push", formerly="fleet.quota_push")
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
                changes = backend.quota_plan(build_desired_state(cluster))
                changed = [c for c in changes if c.action != "unchanged"]
                for change in changed:
                    self.log(f"would {change.describe()}")
                self.log(f"{len(changed)} of {len(changes)} objects would change")
                return {"would_change": len(changed), "unchanged": len(changes) - len(changed)}
            result = backend.push_quota(build_desired_state(cluster))
        except BackendError as exc:
            raise OperationFailed(str(exc)) from exc
        for message in result.messages:
            self.log(message)
        self.log(f"{result.applied} applied, {result.unchanged} unchanged")
        return {"applied": result.applied, "unchanged": result.unchanged}


@register("tenancy.quota-drift", formerly="fleet.quota_drift")
class QuotaDriftOperation(OperationHandler):
    """Compare what a Kubernetes cluster holds under the console's label with its desired quota state."""

    action = "operate"

    def run(self) -> dict:
        cluster = Cluster.objects.get(pk=int(self.operation.params["cluster_id"]))
        backend = get_backend(cluster)
        if not hasattr(backend, "quota_drift"):
            raise OperationFailed(f"drift reports are for Kubernetes clusters; {cluster.name} is {cluster.kind}")
        try:
            report = backend.quota_drift(build_desired_state(cluster))
        except BackendError as exc:
            raise OperationFailed(str(exc)) from exc
        for line in report.lines():
            self.log(line)
        if report.clean:
            self.log("no drift: the cluster holds the desired quota objects and no others, and acts on them")
        return {
            "clean": report.clean,
            "missing": report.missing,
            "changed": report.changed,
            "extra": report.extra,
            "inert": report.inert,
        }
