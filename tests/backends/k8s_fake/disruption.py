"""PodDisruptionBudgets: the disruption controller's status and the Eviction API's check.

https://kubernetes.io/docs/concepts/workloads/pods/disruptions/ and
https://kubernetes.io/docs/tasks/run-application/configure-pdb/: `minAvailable` or `maxUnavailable` (an integer or
a percentage of the expected pods, rounded up) gives the desired healthy count; a pod is healthy when it is Running
and Ready and not being deleted; an eviction is refused with 429 while `disruptionsAllowed` is 0, and with 500
when more than one budget selects the pod (https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/).
A pod that is not running is evicted regardless.
"""

from __future__ import annotations

import math
from datetime import datetime

from tests.backends.k8s_fake import podspec
from tests.backends.k8s_fake.store import ApiError


def _selects(pdb: dict, pod: dict) -> bool:
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None or pod["metadata"].get("namespace") != pdb["metadata"].get("namespace"):
        return False
    return podspec.selector_matches(selector, pod["metadata"].get("labels") or {})


def _healthy(pod: dict) -> bool:
    if pod["metadata"].get("deletionTimestamp") or (pod.get("status") or {}).get("phase") != "Running":
        return False
    conditions = (pod.get("status") or {}).get("conditions")
    if conditions is None:
        return True  # seeded pods without conditions count as ready
    ready = [c for c in conditions if c["type"] == "Ready"]
    return not ready or ready[0]["status"] == "True"


def _scaled(value, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def budget(pdb: dict, pods: list[dict]) -> dict:
    selected = [
        p for p in pods if _selects(pdb, p) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    healthy = sum(1 for p in selected if _healthy(p))
    expected = len(selected)
    spec = pdb.get("spec") or {}
    if "minAvailable" in spec:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = expected - _scaled(spec.get("maxUnavailable", 0), expected)
    return {
        "currentHealthy": healthy,
        "desiredHealthy": max(0, desired),
        "expectedPods": expected,
        "disruptionsAllowed": max(0, healthy - desired),
        "observedGeneration": pdb["metadata"].get("generation", 1),
    }


def status(plane, now: datetime) -> bool:
    resource = plane.resource("policy", "v1", "poddisruptionbudgets")
    pods = plane.store.all("", "pods")
    for pdb in plane.store.all("policy", "poddisruptionbudgets"):
        new = {**(pdb.get("status") or {}), **budget(pdb, pods)}
        if new != pdb.get("status"):
            pdb["status"] = new
            plane.save(resource, pdb)
    return False


def evict(plane, pod: dict, grace: int | None, now: datetime, dry_run: bool) -> None:
    """Evict `pod` or raise 429 (a budget allows no disruption now), as the Eviction subresource does."""
    pods = plane.store.all("", "pods")
    budgets = [pdb for pdb in plane.store.all("policy", "poddisruptionbudgets") if _selects(pdb, pod)]
    if len(budgets) > 1:
        raise ApiError(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
    if budgets and (pod.get("status") or {}).get("phase") == "Running":
        pdb = budgets[0]
        state = budget(pdb, pods)
        if state["disruptionsAllowed"] <= 0:
            raise ApiError(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                {
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget {pdb['metadata']['name']} needs "
                            f"{state['desiredHealthy']} healthy pods and has {state['currentHealthy']} currently",
                        }
                    ]
                },
            )
    if not dry_run:
        plane.delete_pod_or_object(plane.pods, pod, now, grace)
