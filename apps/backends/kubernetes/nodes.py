"""Node operations: cordon / uncordon, taints, drain through the Eviction API.

Cordon ownership: the console writes who, why and when as annotations next to `spec.unschedulable`;
uncordon refuses a node without them, so the console never undoes someone else's cordon. Writes that
replace a list (taints) or depend on what was read (uncordon) carry the resourceVersion they read, so
a concurrent change makes the API server answer 409 and the operation re-reads and tries again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from apps.backends.base import BackendError, NotFoundError, PermanentBackendError, RetryableBackendError
from apps.backends.kubernetes import pods as podinfo
from apps.backends.kubernetes.api import MERGE, STRATEGIC, KubeApi
from apps.backends.kubernetes.resources import NODE, POD
from apps.backends.types import DrainResult, Taint

CORDON_BY = "gpu-console/cordoned-by"
CORDON_REASON = "gpu-console/cordon-reason"
CORDON_AT = "gpu-console/cordoned-at"
CONFLICT_ATTEMPTS = 5
REASON_MAX = 1024  # annotation values may be long; the reason need not be

Progress = Callable[[str, float], None]  # (message, percent done)


@dataclass(frozen=True)
class DrainSettings:
    """`drain_timeout_s`: how long PDB refusals (429) are retried; `drain_grace_period_s`: the most a pod
    gets to stop (default: its own terminationGracePeriodSeconds)."""

    timeout_s: float = 300.0
    grace_period_s: int | None = None
    first_backoff_s: float = 1.0
    max_backoff_s: float = 16.0

    @classmethod
    def from_connection(cls, settings: dict) -> DrainSettings:
        grace = settings.get("drain_grace_period_s")
        return cls(
            timeout_s=float(settings.get("drain_timeout_s", cls.timeout_s)),
            grace_period_s=None if grace is None else int(grace),
            first_backoff_s=float(settings.get("drain_backoff_s", cls.first_backoff_s)),
        )


@dataclass
class NodeOps:
    api: KubeApi
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    drain_settings: DrainSettings = field(default_factory=DrainSettings)

    def read(self, node: str) -> dict:
        try:
            return self.api.get(NODE.path(node), f"read node {node}")
        except NotFoundError as exc:
            raise NotFoundError(f"cluster {self.api.cluster_name}: node {node!r} does not exist") from exc

    def _retry_on_conflict(self, node: str, what: str, attempt: Callable[[dict], None]) -> None:
        """Read the node and run `attempt`; on a 409 (someone changed it since) read again, a few times."""
        for _ in range(CONFLICT_ATTEMPTS):
            live = self.read(node)
            try:
                attempt(live)
                return
            except BackendError as exc:
                if getattr(exc, "code", None) != 409:
                    raise
        raise RetryableBackendError(
            f"cluster {self.api.cluster_name}: {what} on node {node}: it kept changing under us "
            f"({CONFLICT_ATTEMPTS} conflicts in a row); try again"
        )

    # cordon

    def cordon(self, node: str, reason: str = "", by: str = "gpu-console") -> bool:
        """Mark unschedulable with the console's annotations. False: someone else had cordoned it (left as is)."""
        live = self.read(node)
        annotations = live["metadata"].get("annotations") or {}
        if (live.get("spec") or {}).get("unschedulable") and CORDON_BY not in annotations:
            return False
        patch = {
            "metadata": {
                "annotations": {
                    CORDON_BY: by or "gpu-console",
                    CORDON_REASON: (reason or "")[:REASON_MAX],
                    CORDON_AT: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            },
            "spec": {"unschedulable": True},
        }
        self.api.request("PATCH", NODE.path(node), f"cordon node {node}", body=patch, content_type=STRATEGIC)
        return True

    def uncordon(self, node: str) -> None:
        """Make schedulable again, only if the console cordoned it (PermanentBackendError otherwise)."""

        def attempt(live: dict) -> None:
            annotations = live["metadata"].get("annotations") or {}
            cordoned = (live.get("spec") or {}).get("unschedulable")
            if cordoned and CORDON_BY not in annotations:
                raise PermanentBackendError(
                    f"cluster {self.api.cluster_name}: node {node} was cordoned outside the console (it has no "
                    f"{CORDON_BY} annotation); the console leaves it cordoned. Uncordon it with kubectl if that "
                    "is intended."
                )
            if not cordoned and not any(k in annotations for k in (CORDON_BY, CORDON_REASON, CORDON_AT)):
                return
            patch = {
                "metadata": {
                    "resourceVersion": live["metadata"]["resourceVersion"],
                    "annotations": {CORDON_BY: None, CORDON_REASON: None, CORDON_AT: None},
                },
                "spec": {"unschedulable": False},
            }
            self.api.request("PATCH", NODE.path(node), f"uncordon node {node}", body=patch, content_type=STRATEGIC)

        self._retry_on_conflict(node, "uncordon", attempt)

    # taints

    def taint(self, node: str, taint: Taint) -> None:
        def attempt(live: dict) -> None:
            taints = list((live.get("spec") or {}).get("taints") or [])
            wanted = {"key": taint.key, "effect": taint.effect}
            if taint.value:
                wanted["value"] = taint.value
            same = [t for t in taints if t.get("key") == taint.key and t.get("effect") == taint.effect]
            if same and all(t.get("value", "") == taint.value for t in same) and len(same) == 1:
                return
            kept = [t for t in taints if not (t.get("key") == taint.key and t.get("effect") == taint.effect)]
            self._write_taints(node, live, [*kept, wanted], f"taint node {node} with {taint.key}")

        self._retry_on_conflict(node, "taint", attempt)

    def untaint(self, node: str, key: str) -> None:
        def attempt(live: dict) -> None:
            taints = list((live.get("spec") or {}).get("taints") or [])
            kept = [t for t in taints if t.get("key") != key]
            if len(kept) != len(taints):
                self._write_taints(node, live, kept, f"remove taint {key} from node {node}")

        self._retry_on_conflict(node, "untaint", attempt)

    def _write_taints(self, node: str, live: dict, taints: list[dict], what: str) -> None:
        # A merge patch replaces the list whole; the resourceVersion makes it fail if the list changed since.
        patch = {"metadata": {"resourceVersion": live["metadata"]["resourceVersion"]}, "spec": {"taints": taints}}
        self.api.request("PATCH", NODE.path(node), what, body=patch, content_type=MERGE)

    # drain

    def drain(
        self, node: str, reason: str = "", by: str = "gpu-console", progress: Progress | None = None
    ) -> DrainResult:
        """Cordon, then evict every pod but DaemonSet and mirror pods, retrying PDB refusals until the timeout.

        Returns the workloads evicted; pods still refused by a PodDisruptionBudget at the timeout are in
        `blocked` with the API server's reason, and the node stays cordoned.
        """
        report = progress or (lambda message, percent: None)
        owned = self.cordon(node, reason, by)
        report(f"cordoned {node}" if owned else f"{node} was already cordoned outside the console", 0.0)
        candidates = [
            pod
            for page in self.api.pages(POD.path(), f"list pods on node {node}", fieldSelector=f"spec.nodeName={node}")
            for pod in page
        ]
        result = DrainResult(node=node, evicted=[])
        pending: list[dict] = []
        for pod in candidates:
            label = _pod_label(pod)
            if (pod.get("status") or {}).get("phase") in podinfo.FINISHED:
                continue
            if podinfo.is_daemonset_pod(pod):
                result.skipped.append(f"{label}: DaemonSet pod")
            elif podinfo.is_mirror_pod(pod):
                result.skipped.append(f"{label}: mirror (static) pod")
            else:
                pending.append(pod)
        total = len(pending) or 1
        settings = self.drain_settings
        deadline = self.clock() + settings.timeout_s
        backoff = settings.first_backoff_s
        evicted: list[str] = []
        while pending:
            still: list[dict] = []
            for pod in pending:
                label = _pod_label(pod)
                outcome = self._evict(pod)
                if outcome is None:
                    evicted.append(podinfo.workload_id(pod))
                    result.blocked.pop(label, None)
                    report(f"evicted {label}", 100.0 * len(evicted) / total)
                else:
                    result.blocked[label] = outcome
                    still.append(pod)
            pending = still
            if not pending or self.clock() + backoff > deadline:
                break
            self.sleep(backoff)
            backoff = min(backoff * 2, settings.max_backoff_s)
        for label, why in result.blocked.items():
            report(f"blocked after {settings.timeout_s:g} s: {label}: {why}", 100.0 * (total - len(pending)) / total)
        result.evicted = sorted(set(evicted))
        return result

    def _evict(self, pod: dict) -> str | None:
        """None when evicted (or already gone); else why the API server refused (429: a PDB)."""
        meta = pod["metadata"]
        name, ns = meta["name"], meta["namespace"]
        body: dict = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
        grace = self.drain_settings.grace_period_s
        if grace is not None:
            own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            body["deleteOptions"] = {"gracePeriodSeconds": min(int(own), grace)}
        try:
            self.api.request("POST", f"{POD.path(name, ns)}/eviction", f"evict pod {ns}/{name}", body=body)
        except NotFoundError:
            return None
        except BackendError as exc:
            if getattr(exc, "code", None) != 429:
                raise
            causes = getattr(exc, "causes", [])
            return "; ".join(causes) if causes else str(exc)
        return None


def _pod_label(pod: dict) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
