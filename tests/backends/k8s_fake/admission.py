"""The API server's built-in admission for pods, and the ResourceQuota controller's status.

- Priority (https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/#pod-priority): a pod
  naming a PriorityClass that does not exist is refused ("no PriorityClass with name <n> was found"); otherwise
  `spec.priority` is the class's value (the globalDefault class's, or 0, when it names none).
- ResourceQuota (https://kubernetes.io/docs/concepts/policy/resource-quotas/): a pod that would take the
  namespace's requests (`requests.<resource>`, or `cpu` / `memory`), limits or pod count over a quota's `hard` is
  refused with "exceeded quota: ..."; a quota on cpu or memory requires pods to state them ("must specify ...").
"""

from __future__ import annotations

from fractions import Fraction

from tests.backends.k8s_fake import podspec, quantity
from tests.backends.k8s_fake.store import ApiError

SYSTEM_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}


def _forbidden(name: str, message: str) -> ApiError:
    return ApiError(403, "Forbidden", f'pods "{name}" is forbidden: {message}', {"name": name, "kind": "pods"})


def priority(plane, pod: dict) -> None:
    spec = pod["spec"]
    classes = {c["metadata"]["name"]: c for c in plane.store.all("scheduling.k8s.io", "priorityclasses")}
    name = spec.get("priorityClassName")
    if name:
        if name in SYSTEM_CLASSES:
            spec["priority"] = SYSTEM_CLASSES[name]
            return
        if name not in classes:
            raise _forbidden(pod["metadata"]["name"], f"no PriorityClass with name {name} was found")
        spec["priority"] = int(classes[name].get("value", 0))
        spec.setdefault("preemptionPolicy", classes[name].get("preemptionPolicy", "PreemptLowerPriority"))
        return
    default = next((c for c in classes.values() if c.get("globalDefault")), None)
    if default is not None:
        spec["priorityClassName"] = default["metadata"]["name"]
    spec["priority"] = int(default.get("value", 0)) if default else 0


def _usage_of(spec: dict) -> dict[str, Fraction]:
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        podspec.add(requests, podspec.container_requests(container))
        podspec.add(
            limits, {k: quantity.parse(v) for k, v in ((container.get("resources") or {}).get("limits") or {}).items()}
        )
    usage = {f"requests.{k}": v for k, v in requests.items()}
    usage.update({k: v for k, v in requests.items() if k in ("cpu", "memory")})
    usage.update({f"limits.{k}": v for k, v in limits.items()})
    usage["pods"] = usage["count/pods"] = Fraction(1)
    return usage


def _namespace_usage(plane, ns: str) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for pod in plane.store.all("", "pods"):
        if pod["metadata"].get("namespace") == ns and (pod.get("status") or {}).get("phase") not in (
            "Succeeded",
            "Failed",
        ):
            podspec.add(total, _usage_of(pod["spec"]))
    return total


def resource_quota(plane, pod: dict) -> None:
    ns = pod["metadata"]["namespace"]
    quotas = [q for q in plane.store.all("", "resourcequotas") if q["metadata"].get("namespace") == ns]
    if not quotas:
        return
    wanted = _usage_of(pod["spec"])
    used = _namespace_usage(plane, ns)
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        hard = {k: quantity.parse(v) for k, v in ((quota.get("spec") or {}).get("hard") or {}).items()}
        missing = sorted(
            key
            for key in hard
            if key in ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
            and key not in wanted
            and f"requests.{key}" not in wanted
        )
        if missing:
            raise _forbidden(
                pod["metadata"]["name"], f"failed quota: {quota['metadata']['name']}: must specify {','.join(missing)}"
            )
        over = sorted(k for k, limit in hard.items() if k in wanted and used.get(k, 0) + wanted[k] > limit)
        if over:

            def show(values):
                return ",".join(f"{k}={quantity.text(k.split('.', 1)[-1], values.get(k, Fraction(0)))}" for k in over)

            raise _forbidden(
                pod["metadata"]["name"],
                f"exceeded quota: {quota['metadata']['name']}, requested: {show(wanted)}, used: {show(used)}, "
                f"limited: {show(hard)}",
            )


def quota_status(plane) -> bool:
    resource = plane.resource("", "v1", "resourcequotas")
    for quota in plane.store.all("", "resourcequotas"):
        hard = (quota.get("spec") or {}).get("hard") or {}
        used = _namespace_usage(plane, quota["metadata"]["namespace"])
        status = {
            "hard": dict(hard),
            "used": {k: quantity.text(k.split(".", 1)[-1], used.get(k, Fraction(0))) for k in hard},
        }
        if quota.get("status") != status:
            quota["status"] = status
            plane.save(resource, quota)
    return False
