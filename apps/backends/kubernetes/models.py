"""What the Kubernetes backend remembers in the console's database (the cluster itself forgets it).

Registered under the `backends` app (apps/backends/models.py imports this module; the table and its
migration are the app's: backends_kubecancellation).
"""

from __future__ import annotations

from django.db import models


class KubeCancellation(models.Model):
    """A workload the console deleted from a Kubernetes cluster, remembered after the objects are gone.

    Kubernetes forgets a deleted Job: without this row, `status` would answer "unknown" for a workload
    the console cancelled, and the GPU time its pods had used would vanish from `usage_since`.
    """

    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="kube_cancellations")
    backend_id = models.CharField(max_length=63)
    cancelled_at = models.DateTimeField()
    usage = models.JSONField(default=list, blank=True, help_text="per pod: start, end, gpus, tenant, queue, model")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "backend_id"], name="kube_cancellation_unique_per_cluster")
        ]
        indexes = [models.Index(fields=["cluster", "cancelled_at"], name="kube_cancellation_when")]

    def __str__(self) -> str:
        return f"{self.backend_id} cancelled on {self.cluster_id}"
