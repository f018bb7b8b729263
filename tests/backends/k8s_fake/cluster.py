"""A deterministic semantic model of a cluster's control plane, for the fake API server.

Each `tick(now)` runs the controllers until nothing changes: garbage collection (foreground and background
deletion), Kueue (kueue.py), Volcano (volcano.py), Kubeflow Trainer (trainer.py) and KServe (kserve.py) when
installed, the Job / Deployment / LeaderWorkerSet controllers and the kubelet (workloads.py, its image pulls in
images.py), the DaemonSet controller (daemonset.py), KEDA (keda.py),
kube-scheduler (scheduler.py) and HAMi's scheduler (hami.py), the disruption and quota controllers (disruption.py,
admission.py). Objects created through the API, and pods the controllers create, pass the admission the real
cluster applies: Kueue's, Volcano's, HAMi's, Trainer's and KServe's webhooks, the Priority and ResourceQuota
plugins. Every module cites the documentation it follows and says what it leaves out.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta

from tests.backends.k8s_fake import admission, daemonset, disruption, hami, keda, workloads
from tests.backends.k8s_fake.hami import HamiScheduler
from tests.backends.k8s_fake.images import ImagePuller
from tests.backends.k8s_fake.kserve import KServe
from tests.backends.k8s_fake.kueue import Kueue, KueueConfig
from tests.backends.k8s_fake.resources import Resource, find
from tests.backends.k8s_fake.scheduler import KubeScheduler, Snapshot
from tests.backends.k8s_fake.store import ApiError, Store, timestamp
from tests.backends.k8s_fake.trainer import Trainer
from tests.backends.k8s_fake.volcano import Volcano

TERMINAL = workloads.TERMINAL


def owner_ref(owner: dict, controller: bool = True) -> dict:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


class ControlPlane:
    """The controllers over one store; `resources` are the served ones (the installed add-ons decide which
    controllers run)."""

    def __init__(
        self,
        store: Store,
        resources: list[Resource],
        kueue: KueueConfig | None = None,
        hami_installed: bool = False,
        lws_gang: str = "",
        images: ImagePuller | None = None,
    ):
        self.store = store
        self.resources = resources
        self.pods = find(resources, "", "v1", "pods")
        self.nodes = find(resources, "", "v1", "nodes")
        self.events = find(resources, "", "v1", "events")
        self.kueue = Kueue(self, kueue) if find(resources, "kueue.x-k8s.io", "v1beta2", "clusterqueues") else None
        self.volcano = Volcano(self) if find(resources, "batch.volcano.sh", "v1alpha1", "jobs") else None
        self.trainer = Trainer(self) if find(resources, "trainer.kubeflow.org", "v1alpha1", "trainjobs") else None
        self.kserve = KServe(self) if find(resources, "serving.kserve.io", "v1beta1", "inferenceservices") else None
        self.hami = hami_installed
        self.schedulers = [KubeScheduler(self), *([HamiScheduler(self)] if hami_installed else [])]
        self.keda_metrics: dict[tuple[str, str], int] = {}
        self.lws_gang = lws_gang  # the LWS controller's gangSchedulingManagement.schedulerProvider
        self.images = images  # the kubelets' image pulls, when modelled (images.py)
        self.deployment_pods = 0
        self._event_seq = 0
        self._events_seen: set[tuple[str, str, str]] = set()

    # --- helpers the controllers share -----------------------------------------------------------------------

    def resource(self, group: str, version: str, plural: str) -> Resource | None:
        return find(self.resources, group, version, plural)

    def save(self, resource: Resource, obj: dict) -> None:
        self.store.put(resource, obj)

    @staticmethod
    def stamp(now: datetime) -> str:
        return timestamp(now)

    owner_ref = staticmethod(owner_ref)

    def snapshot(self) -> Snapshot:
        namespaces = {
            n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in self.store.all("", "namespaces")
        }
        return Snapshot(self.store.all("", "nodes"), self.store.all("", "pods"), namespaces)

    def pods_of(self, owner: dict) -> list[dict]:
        uid = owner["metadata"]["uid"]
        return [
            p
            for p in self.store.all("", "pods")
            if any(ref.get("uid") == uid for ref in p["metadata"].get("ownerReferences", []))
        ]

    _pods_of = pods_of  # the server's name for it

    def event(self, now: datetime, involved: dict, reason: str, message: str, kind: str = "Warning") -> None:
        """Record an Event once per object, reason and message (repeats are what the real recorder counts)."""
        meta = involved["metadata"]
        key = (meta.get("uid", ""), reason, message)
        if key in self._events_seen:
            return
        self._events_seen.add(key)
        self._event_seq += 1
        if not self.store.namespace_exists(meta.get("namespace") or "default"):
            return
        self.store.create(
            self.events,
            meta.get("namespace") or "default",
            {
                "metadata": {"name": f"{meta['name']}.{self._event_seq:x}"},
                "involvedObject": {
                    "apiVersion": involved.get("apiVersion", ""),
                    "kind": involved.get("kind", ""),
                    "name": meta["name"],
                    "namespace": meta.get("namespace", ""),
                    "uid": meta.get("uid", ""),
                },
                "reason": reason,
                "message": message,
                "type": kind,
                "count": 1,
                "firstTimestamp": timestamp(now),
                "lastTimestamp": timestamp(now),
                "source": {"component": "fake-control-plane"},
            },
        )

    # --- admission ------------------------------------------------------------------------------------------

    def admit(self, resource: Resource, ns: str, obj: dict) -> None:
        """What the API server does to a new object before storing it: mutating webhooks (Kueue, Volcano, HAMi),
        the Priority plugin, validating webhooks, ResourceQuota. Raises ApiError to refuse it."""
        meta = obj.setdefault("metadata", {})
        if resource.namespaced:
            meta["namespace"] = ns
        if self.kueue is not None:
            self.kueue.mutate(resource, obj)
        if resource is self.pods:
            # The pod registry's PrepareForCreate: a new pod's status is the API server's, whatever was sent.
            obj["status"] = {"phase": "Pending"}
            if self.hami:
                hami.mutate_pod(obj)
            admission.priority(self, obj)
        if self.volcano is not None:
            self.volcano.admit(resource, obj)
        for validating in (self.trainer, self.kserve):
            if validating is not None:
                validating.admit(resource, obj)
        self.validate(resource, obj)
        if resource is self.pods:
            admission.resource_quota(self, obj)

    def validate(self, resource: Resource, obj: dict) -> None:
        """The API server's validation of a new or changed object, for the kinds whose rules the model has."""
        if (resource.group, resource.kind) == ("apps", "DaemonSet"):
            daemonset.validate(obj)

    def create_pod(self, owner: dict, template: dict, name: str, extra_labels: dict, now: datetime) -> bool:
        """Create a pod from a template as a controller does; a refusal becomes the owner's FailedCreate event."""
        meta = template.get("metadata") or {}
        pod = {
            "metadata": {
                "name": name,
                "labels": {**(meta.get("labels") or {}), **extra_labels},
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [owner_ref(owner)],
            },
            "spec": copy.deepcopy(template["spec"]),
            "status": {"phase": "Pending"},
        }
        try:
            self.admit(self.pods, owner["metadata"]["namespace"], pod)
            self.store.create(self.pods, owner["metadata"]["namespace"], pod)
        except ApiError as exc:
            self.event(now, owner, "FailedCreate", f"Error creating: {exc.message}")
            return False
        return True

    # --- the loop -----------------------------------------------------------------------------------------------

    def tick(self, now: datetime) -> None:
        for _ in range(40):
            changed = self._collect_garbage(now)
            admission.quota_status(self)
            if self.kueue is not None:
                changed |= self.kueue.reconcile(now)
            if self.volcano is not None:
                changed |= self.volcano.reconcile(now)
            for controller in (self.trainer, self.kserve):
                if controller is not None:
                    changed |= controller.reconcile(now)
            changed |= workloads.jobs(self, now)
            changed |= workloads.deployments(self, now)
            changed |= workloads.leader_worker_sets(self, now)
            changed |= daemonset.daemon_sets(self, now)
            changed |= keda.scaled_objects(self, now)
            for scheduler in self.schedulers:
                changed |= scheduler.schedule(now)
            changed |= workloads.kubelet(self, now)
            disruption.status(self, now)
            if not changed:
                return

    # --- garbage collection and deletion ---------------------------------------------------------------------

    def _collect_garbage(self, now: datetime) -> bool:
        changed = False
        live_uids = {o["metadata"]["uid"] for bucket in self.store.objects.values() for o in bucket.values()}
        for resource in self.resources:
            for obj in list(self.store.bucket(resource).values()):
                meta = obj["metadata"]
                refs = meta.get("ownerReferences") or []
                if refs and not any(r.get("uid") in live_uids for r in refs):
                    changed |= self.delete_pod_or_object(resource, obj, now, grace=None)
                    continue
                if "foregroundDeletion" in (meta.get("finalizers") or []):
                    dependents = [
                        o
                        for r in self.resources
                        for o in self.store.bucket(r).values()
                        if any(ref.get("uid") == meta["uid"] for ref in o["metadata"].get("ownerReferences") or [])
                    ]
                    for dependent in dependents:
                        if not dependent["metadata"].get("deletionTimestamp"):
                            kind = next(r for r in self.resources if dependent in self.store.bucket(r).values())
                            self.delete_pod_or_object(kind, dependent, now, grace=None)
                            changed = True
                    if not dependents:
                        self.store.remove(resource, meta.get("namespace", ""), meta["name"])
                        changed = True
        return changed

    def delete(self, resource: Resource, obj: dict, now: datetime) -> bool:
        return self.delete_pod_or_object(resource, obj, now, grace=None)

    def delete_pod_or_object(self, resource: Resource, obj: dict, now: datetime, grace: int | None) -> bool:
        """Delete: a pod on a node terminates for its grace period first; anything else goes now."""
        meta = obj["metadata"]
        if resource is self.pods and obj["spec"].get("nodeName") and obj["status"].get("phase") not in TERMINAL:
            if meta.get("deletionTimestamp"):
                return False
            seconds = obj["spec"].get("terminationGracePeriodSeconds", 30) if grace is None else grace
            if seconds > 0:
                meta["deletionTimestamp"] = timestamp(now + timedelta(seconds=seconds))
                meta["deletionGracePeriodSeconds"] = seconds
                self.save(resource, obj)
                return True
        self.store.remove(resource, meta.get("namespace", ""), meta["name"])
        return True

    def evict(self, pod: dict, grace: int | None, now: datetime, dry_run: bool) -> None:
        disruption.evict(self, pod, grace, now, dry_run)
