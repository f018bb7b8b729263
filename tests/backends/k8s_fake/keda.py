"""KEDA's ScaledObject controller: it checks its scale target and keeps the target's replicas within bounds.

https://keda.sh/docs/latest/reference/scaledobject-spec/ and KEDA's controllers/keda/scaledobject_controller.go:
a target that does not exist sets `Ready=False` (reason `ScaledObjectCheckFailed`, "ScaledObject doesn't have
correct scaleTargetRef specification") and `Active=Unknown`, with a Warning event, and nothing is scaled. A valid
one is `Ready=True` (`ScaledObjectReady`); KEDA's HPA keeps the target between `max(1, minReplicaCount)` and
`maxReplicaCount` (default 100); with `minReplicaCount: 0` and inactive triggers KEDA scales the target to zero
once `cooldownPeriod` (default 300 s) has passed.

The model cannot read the triggers' metrics: a test states the desired replica count the metrics would give with
`FakeKubernetes.scale_metric(namespace, name, replicas)` (triggers are then active); without it, the triggers are
inactive and the HPA leaves the replica count where it is.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.backends.k8s_fake.store import parse_time, timestamp

CHECK_FAILED = "ScaledObject doesn't have correct scaleTargetRef specification"
TARGETS = {
    ("apps", "Deployment"): ("apps", "v1", "deployments"),
    ("apps", "StatefulSet"): ("apps", "v1", "statefulsets"),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
}


def _conditions(ready: bool, active: bool | None, now: datetime) -> list[dict]:
    stamp = timestamp(now)
    if not ready:
        return [
            {
                "type": "Ready",
                "status": "False",
                "reason": "ScaledObjectCheckFailed",
                "message": "ScaledObject doesn't have correct scaleTargetRef specification",
                "lastTransitionTime": stamp,
            },
            {
                "type": "Active",
                "status": "Unknown",
                "reason": "UnkownState",
                "message": "ScaledObject check failed",
                "lastTransitionTime": stamp,
            },
        ]
    return [
        {
            "type": "Ready",
            "status": "True",
            "reason": "ScaledObjectReady",
            "message": "ScaledObject is defined correctly and is ready for scaling",
            "lastTransitionTime": stamp,
        },
        {
            "type": "Active",
            "status": "True" if active else "False",
            "reason": "ScalerActive" if active else "ScalerNotActive",
            "message": "Scaling is performed because triggers are active"
            if active
            else "Scaling is not performed because triggers are not active",
            "lastTransitionTime": stamp,
        },
    ]


def scaled_objects(plane, now: datetime) -> bool:
    resource = plane.resource("keda.sh", "v1alpha1", "scaledobjects")
    if resource is None:
        return False
    changed = False
    for so in plane.store.all("keda.sh", "scaledobjects"):
        ns, spec = so["metadata"]["namespace"], so.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        group = (ref.get("apiVersion") or "apps/v1").rpartition("/")[0]
        kind = ref.get("kind") or "Deployment"
        target_resource = plane.resource(*TARGETS[(group, kind)]) if (group, kind) in TARGETS else None
        target = None
        if target_resource is not None and ref.get("name"):
            target = plane.store.bucket(target_resource).get((ns, ref["name"]))
        status = dict(so.get("status") or {})
        if target is None:
            new = {**status, "conditions": _conditions(False, None, now)}
            if [c["status"] for c in status.get("conditions") or []] != ["False", "Unknown"]:
                so["status"] = new
                plane.save(resource, so)
                plane.event(
                    now, so, "ScaledObjectCheckFailed", "ScaledObject doesn't have correct scaleTargetRef specification"
                )
            continue
        desired = plane.keda_metrics.get((ns, so["metadata"]["name"]))
        active = desired is not None
        minimum, maximum = int(spec.get("minReplicaCount", 0)), int(spec.get("maxReplicaCount", 100))
        current = int(target["spec"].get("replicas", 1))
        replicas = min(max(desired if active else current, max(1, minimum)), maximum)
        since = status.get("readySince") or timestamp(now)
        if (
            minimum == 0
            and not active
            and now - parse_time(since) >= timedelta(seconds=int(spec.get("cooldownPeriod", 300)))
        ):
            replicas = 0
        new = {
            **status,
            "readySince": since,
            "scaleTargetKind": f"{target['apiVersion']}.{kind}",
            "scaleTargetGVKR": {
                "group": group,
                "kind": kind,
                "resource": target_resource.plural,
                "version": target_resource.version,
            },
            "originalReplicaCount": status.get("originalReplicaCount", current),
            "hpaName": f"keda-hpa-{so['metadata']['name']}",
            "conditions": _conditions(True, active, now),
        }
        if [(c["type"], c["status"]) for c in status.get("conditions") or []] == [
            (c["type"], c["status"]) for c in new["conditions"]
        ]:
            new["conditions"] = status["conditions"]
        if new != status:
            so["status"] = new
            plane.save(resource, so)
        if replicas != current:
            target["spec"]["replicas"] = replicas
            plane.save(target_resource, target)
            changed = True
    return changed
