"""A tiny, deterministic control plane for the fake API: just enough to move workloads through phases.

Each `tick(now)` runs, until nothing changes: garbage collection (foreground and background deletion),
"Kueue" admission (unsuspends a queued batch Job: no quota accounting), the Job, Volcano Job, Deployment
and LeaderWorkerSet controllers (they create pods from their templates), a first-fit scheduler over
`nvidia.com/*` extended resources (node selector, taints, cordon, Ready; no CPU/memory, affinity or gang
scheduling), and a "kubelet" that starts bound pods and finishes them when their command's `sleep N` is
over in the fake clock (a command containing `false` fails). Pods being deleted go away once their grace
period has passed. Nothing here is Kubernetes' real logic; it is only what the backend's tests need.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from tests.backends.k8s_fake.resources import Resource, find
from tests.backends.k8s_fake.store import ApiError, Store, label_matcher, parse_time, timestamp

TERMINAL = {"Succeeded", "Failed"}
GPU_PREFIX = "nvidia.com/"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"


def _quantity(value: object) -> float:
    text = str(value)
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    return float(text)


def pod_requests(pod: dict) -> dict[str, float]:
    """Extended nvidia.com/* resources a pod asks for (sum over its containers)."""
    out: dict[str, float] = {}
    for container in pod["spec"].get("containers", []):
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if name.startswith(GPU_PREFIX):
                out[name] = out.get(name, 0.0) + _quantity(value)
    return out


def _run_seconds(pod: dict) -> tuple[float | None, bool]:
    """(seconds the main container runs, whether it fails): from a `sleep N` in its command and args."""
    container = pod["spec"]["containers"][0]
    argv = [str(a).replace("$$", "$") for a in [*(container.get("command") or []), *(container.get("args") or [])]]
    seconds = None
    for i, arg in enumerate(argv[:-1]):
        if arg == "sleep":
            try:
                seconds = float(argv[i + 1])
            except ValueError:
                seconds = None
    return seconds, "false" in argv


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
    """The controllers over one store; `resources` are the served ones (add-ons decide what runs)."""

    def __init__(self, store: Store, resources: list[Resource]):
        self.store = store
        self.resources = resources
        self.pods = find(resources, "", "v1", "pods")
        self.nodes = find(resources, "", "v1", "nodes")
        self.events = find(resources, "", "v1", "events")
        self._event_seq = 0

    def resource(self, group: str, version: str, plural: str) -> Resource | None:
        return find(self.resources, group, version, plural)

    def tick(self, now: datetime) -> None:
        for _ in range(10):
            changed = self._collect_garbage(now)
            changed |= self._kueue_admission()
            changed |= self._jobs(now)
            changed |= self._volcano_jobs(now)
            changed |= self._deployments()
            changed |= self._leader_worker_sets()
            changed |= self._schedule(now)
            changed |= self._kubelet(now)
            if not changed:
                return

    # helpers

    def _pods_of(self, owner: dict) -> list[dict]:
        uid = owner["metadata"]["uid"]
        return [
            p
            for p in self.store.all("", "pods")
            if any(ref.get("uid") == uid for ref in p["metadata"].get("ownerReferences", []))
        ]

    def _save(self, resource: Resource, obj: dict) -> None:
        self.store.put(resource, obj)

    def create_pod(self, owner: dict, template: dict, name: str, extra_labels: dict) -> None:
        meta = template.get("metadata") or {}
        pod = {
            "metadata": {
                "name": name,
                "labels": {**(meta.get("labels") or {}), **extra_labels},
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [owner_ref(owner)],
            },
            "spec": dict(template["spec"]),
            "status": {"phase": "Pending"},
        }
        self.store.create(self.pods, owner["metadata"]["namespace"], pod)

    def event(self, now: datetime, involved: dict, reason: str, message: str, kind: str = "Warning") -> None:
        self._event_seq += 1
        meta = involved["metadata"]
        self.store.create(
            self.events,
            meta["namespace"],
            {
                "metadata": {"name": f"{meta['name']}.{self._event_seq:x}"},
                "involvedObject": {
                    "kind": involved["kind"],
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "uid": meta["uid"],
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

    # garbage collection

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
                    dependents = self._pods_of(obj)
                    for pod in dependents:
                        if not pod["metadata"].get("deletionTimestamp"):
                            self.delete_pod_or_object(self.pods, pod, now, grace=None)
                            changed = True
                    if not self._pods_of(obj):
                        self.store.remove(resource, meta.get("namespace", ""), meta["name"])
                        changed = True
        return changed

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
                self._save(resource, obj)
                return True
        self.store.remove(resource, meta.get("namespace", ""), meta["name"])
        return True

    # "Kueue": admits every queued Job at once (no quota), by unsuspending it

    def _kueue_admission(self) -> bool:
        if not self.resource("kueue.x-k8s.io", "v1beta2", "clusterqueues"):
            return False
        jobs = self.resource("batch", "v1", "jobs")
        changed = False
        for job in self.store.all("batch", "jobs"):
            if job["spec"].get("suspend") and KUEUE_QUEUE in (job["metadata"].get("labels") or {}):
                if job["metadata"].get("deletionTimestamp"):
                    continue
                job["spec"]["suspend"] = False
                self._save(jobs, job)
                changed = True
        return changed

    # batch/v1 Job

    def _jobs(self, now: datetime) -> bool:
        resource = self.resource("batch", "v1", "jobs")
        changed = False
        for job in self.store.all("batch", "jobs"):
            spec, status = job["spec"], job.setdefault("status", {})
            if job["metadata"].get("deletionTimestamp") or _finished(status):
                continue
            pods = self._pods_of(job)
            succeeded = {
                p["metadata"]["labels"].get("batch.kubernetes.io/job-completion-index")
                for p in pods
                if p["status"].get("phase") == "Succeeded"
            }
            failed = sum(1 for p in pods if p["status"].get("phase") == "Failed")
            active = [p for p in pods if p["status"].get("phase") not in TERMINAL]
            completions = spec.get("completions", 1)
            new = {
                **status,
                "active": len(active),
                "succeeded": len(succeeded),
                "failed": failed,
                "ready": sum(1 for p in active if p["status"].get("phase") == "Running"),
            }
            if spec.get("suspend"):
                new.setdefault("conditions", [])
                if not any(c["type"] == "Suspended" for c in new["conditions"]):
                    new["conditions"] = [*new["conditions"], _condition("Suspended", "JobSuspended", now)]
            else:
                new["conditions"] = [c for c in new.get("conditions", []) if c["type"] != "Suspended"]
                new.setdefault("startTime", timestamp(now))
                deadline = spec.get("activeDeadlineSeconds")
                if len(succeeded) >= completions:
                    new["conditions"] = [*new["conditions"], _condition("Complete", "", now)]
                    new["completionTime"] = timestamp(now)
                elif failed > spec.get("backoffLimit", 6):
                    new["conditions"] = [
                        *new["conditions"],
                        _condition(
                            "Failed", "BackoffLimitExceeded", now, "Job has reached the specified backoff limit"
                        ),
                    ]
                elif deadline and now - parse_time(new["startTime"]) >= timedelta(seconds=deadline):
                    new["conditions"] = [
                        *new["conditions"],
                        _condition("Failed", "DeadlineExceeded", now, "Job was active longer than specified deadline"),
                    ]
                else:
                    running = {p["metadata"]["labels"].get("batch.kubernetes.io/job-completion-index") for p in active}
                    for index in range(completions):
                        if str(index) in succeeded or str(index) in running:
                            continue
                        if len(active) >= spec.get("parallelism", 1):
                            break
                        name = f"{job['metadata']['name']}-{index}-{_suffix(job, index, len(pods))}"
                        labels = {
                            "batch.kubernetes.io/job-name": job["metadata"]["name"],
                            "job-name": job["metadata"]["name"],
                            "batch.kubernetes.io/job-completion-index": str(index),
                        }
                        self.create_pod(job, spec["template"], name, labels)
                        active.append({"metadata": {"labels": labels}, "status": {}})
                        changed = True
                if _finished(new):
                    for pod in active:
                        if pod.get("metadata", {}).get("uid"):
                            self.delete_pod_or_object(self.pods, pod, now, grace=None)
            if new != status:
                job["status"] = new
                self._save(resource, job)
                changed = True
        return changed

    # Volcano Job (batch.volcano.sh/v1alpha1)

    def _volcano_jobs(self, now: datetime) -> bool:
        resource = self.resource("batch.volcano.sh", "v1alpha1", "jobs")
        if resource is None:
            return False
        changed = False
        for job in self.store.all("batch.volcano.sh", "jobs"):
            status = job.setdefault("status", {})
            phase = (status.get("state") or {}).get("phase", "")
            if job["metadata"].get("deletionTimestamp") or phase in {"Completed", "Failed", "Aborted", "Terminated"}:
                continue
            pods = self._pods_of(job)
            names = {p["metadata"]["name"] for p in pods}
            total = 0
            for task in job["spec"].get("tasks", []):
                for index in range(task.get("replicas", 1)):
                    total += 1
                    name = f"{job['metadata']['name']}-{task['name']}-{index}"
                    if name not in names:
                        labels = {
                            "volcano.sh/job-name": job["metadata"]["name"],
                            "volcano.sh/task-spec": task["name"],
                            "volcano.sh/job-namespace": job["metadata"]["namespace"],
                        }
                        self.create_pod(job, task["template"], name, labels)
                        changed = True
            pods = self._pods_of(job)
            counts = {p: sum(1 for x in pods if x["status"].get("phase") == p) for p in ("Running", "Succeeded")}
            failed = sum(1 for x in pods if x["status"].get("phase") == "Failed")
            if counts["Succeeded"] >= total:
                new_phase = "Completed"
            elif failed:
                new_phase = "Failed"
            elif counts["Running"] + counts["Succeeded"] >= job["spec"].get("minAvailable", total):
                new_phase = "Running"
            else:
                new_phase = "Pending"
            new = {
                **status,
                "state": {"phase": new_phase, "lastTransitionTime": timestamp(now)}
                if new_phase != phase
                else status.get("state"),
                "running": counts["Running"],
                "succeeded": counts["Succeeded"],
                "failed": failed,
                "minAvailable": job["spec"].get("minAvailable", total),
            }
            if new != status:
                job["status"] = new
                self._save(resource, job)
                changed = True
        return changed

    # apps/v1 Deployment (pods named as a ReplicaSet's would be; no ReplicaSet object)

    def _deployments(self) -> bool:
        resource = self.resource("apps", "v1", "deployments")
        changed = False
        for deploy in self.store.all("apps", "deployments"):
            if deploy["metadata"].get("deletionTimestamp"):
                continue
            pods = [p for p in self._pods_of(deploy) if not p["metadata"].get("deletionTimestamp")]
            wanted = deploy["spec"].get("replicas", 1)
            template_hash = hashlib.sha256(repr(deploy["spec"]["template"]).encode()).hexdigest()[:10]
            for index in range(len(pods), wanted):
                name = f"{deploy['metadata']['name']}-{template_hash}-{index:05d}"
                self.create_pod(deploy, deploy["spec"]["template"], name, {"pod-template-hash": template_hash})
                changed = True
            ready = sum(1 for p in pods if p["status"].get("phase") == "Running")
            status = {
                "observedGeneration": deploy["metadata"].get("generation", 1),
                "replicas": max(len(pods), wanted),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "conditions": [
                    {
                        "type": "Available",
                        "status": "True" if ready >= wanted else "False",
                        "reason": "MinimumReplicasAvailable" if ready >= wanted else "MinimumReplicasUnavailable",
                    }
                ],
            }
            if deploy.get("status") != status:
                deploy["status"] = status
                self._save(resource, deploy)
                changed = True
        return changed

    # LeaderWorkerSet: per group a leader pod "<name>-<g>" and workers "<name>-<g>-<i>"

    def _leader_worker_sets(self) -> bool:
        resource = self.resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
        if resource is None:
            return False
        changed = False
        for lws in self.store.all("leaderworkerset.x-k8s.io", "leaderworkersets"):
            if lws["metadata"].get("deletionTimestamp"):
                continue
            spec = lws["spec"]
            template = spec["leaderWorkerTemplate"]
            size = template.get("size", 1)
            names = {p["metadata"]["name"]: p for p in self._pods_of(lws)}
            ready_groups = 0
            for group in range(spec.get("replicas", 1)):
                base = f"{lws['metadata']['name']}-{group}"
                members = [(base, template.get("leaderTemplate") or template["workerTemplate"], "0")]
                members += [(f"{base}-{i}", template["workerTemplate"], str(i)) for i in range(1, size)]
                for name, pod_template, worker_index in members:
                    if name not in names:
                        labels = {
                            "leaderworkerset.sigs.k8s.io/name": lws["metadata"]["name"],
                            "leaderworkerset.sigs.k8s.io/group-index": str(group),
                            "leaderworkerset.sigs.k8s.io/worker-index": worker_index,
                        }
                        self.create_pod(lws, pod_template, name, labels)
                        changed = True
                if all(names.get(n, {}).get("status", {}).get("phase") == "Running" for n, _, _ in members):
                    ready_groups += 1
            wanted = spec.get("replicas", 1)
            status = {
                "replicas": wanted,
                "readyReplicas": ready_groups,
                "conditions": [
                    {"type": "Available", "status": "True" if ready_groups >= wanted else "False", "reason": ""}
                ],
            }
            if lws.get("status") != status:
                lws["status"] = status
                self._save(resource, lws)
                changed = True
        return changed

    # scheduler and kubelet

    def _free(self) -> dict[str, dict[str, float]]:
        used: dict[str, dict[str, float]] = {}
        for pod in self.store.all("", "pods"):
            node = pod["spec"].get("nodeName")
            if node and pod["status"].get("phase") not in TERMINAL:
                for name, amount in pod_requests(pod).items():
                    used.setdefault(node, {})[name] = used.get(node, {}).get(name, 0.0) + amount
        free = {}
        for node in self.store.all("", "nodes"):
            name = node["metadata"]["name"]
            allocatable = {
                k: _quantity(v)
                for k, v in (node["status"].get("allocatable") or {}).items()
                if k.startswith(GPU_PREFIX)
            }
            free[name] = {k: v - used.get(name, {}).get(k, 0.0) for k, v in allocatable.items()}
        return free

    def _fits(self, node: dict, pod: dict, free: dict[str, float]) -> str:
        """'' if the pod fits the node, else why not."""
        if node["spec"].get("unschedulable"):
            return "node(s) were unschedulable"
        ready = next((c for c in node["status"].get("conditions", []) if c["type"] == "Ready"), None)
        if not ready or ready["status"] != "True":
            return "node(s) were not ready"
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in (pod["spec"].get("nodeSelector") or {}).items()):
            return "node(s) didn't match Pod's node affinity/selector"
        for taint in node["spec"].get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint, pod):
                return "node(s) had untolerated taint(s)"
        for name, amount in pod_requests(pod).items():
            if free.get(name, 0.0) + 1e-9 < amount:
                return f"Insufficient {name}"
        return ""

    def _schedule(self, now: datetime) -> bool:
        pending = [
            p
            for p in self.store.all("", "pods")
            if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
        ]
        if not pending:
            return False
        free = self._free()
        nodes = sorted(self.store.all("", "nodes"), key=lambda n: n["metadata"]["name"])
        changed = False
        for pod in sorted(pending, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"])):
            reasons: dict[str, int] = {}
            for node in nodes:
                why = self._fits(node, pod, free[node["metadata"]["name"]])
                if why:
                    reasons[why] = reasons.get(why, 0) + 1
                    continue
                pod["spec"]["nodeName"] = node["metadata"]["name"]
                for name, amount in pod_requests(pod).items():
                    free[node["metadata"]["name"]][name] -= amount
                pod["status"]["conditions"] = [_condition("PodScheduled", "", now)]
                self._save(self.pods, pod)
                changed = True
                break
            else:
                detail = ", ".join(f"{count} {why}" for why, count in sorted(reasons.items()))
                message = f"0/{len(nodes)} nodes are available: {detail}."
                condition = _condition("PodScheduled", "Unschedulable", now, message, status="False")
                previous = (pod["status"].get("conditions") or [{}])[0]
                if previous.get("message") != message:
                    pod["status"]["conditions"] = [condition]
                    self._save(self.pods, pod)
                    self.event(now, pod, "FailedScheduling", message)
        return changed

    def _kubelet(self, now: datetime) -> bool:
        changed = False
        for pod in list(self.store.all("", "pods")):
            meta, status = pod["metadata"], pod["status"]
            if meta.get("deletionTimestamp"):
                if now >= parse_time(meta["deletionTimestamp"]):
                    self.store.remove(self.pods, meta["namespace"], meta["name"])
                    changed = True
                continue
            if not pod["spec"].get("nodeName"):
                continue
            if status.get("phase") == "Pending":
                status.update(
                    phase="Running",
                    startTime=timestamp(now),
                    containerStatuses=[
                        {"name": c["name"], "ready": True, "state": {"running": {"startedAt": timestamp(now)}}}
                        for c in pod["spec"]["containers"]
                    ],
                )
                self._save(self.pods, pod)
                changed = True
            elif status.get("phase") == "Running":
                seconds, fails = _run_seconds(pod)
                started = parse_time(status["startTime"])
                if seconds is not None and now >= started + timedelta(seconds=seconds):
                    finished = timestamp(started + timedelta(seconds=seconds))
                    code = 1 if fails else 0
                    status["phase"] = "Failed" if fails else "Succeeded"
                    status["containerStatuses"] = [
                        {
                            "name": c["name"],
                            "ready": False,
                            "state": {
                                "terminated": {
                                    "exitCode": code,
                                    "reason": "Error" if fails else "Completed",
                                    "startedAt": status["startTime"],
                                    "finishedAt": finished,
                                }
                            },
                        }
                        for c in pod["spec"]["containers"]
                    ]
                    self._save(self.pods, pod)
                    changed = True
        return changed

    # eviction (policy/v1) with PodDisruptionBudgets

    def evict(self, pod: dict, grace: int | None, now: datetime, dry_run: bool) -> None:
        """Evict `pod` or raise 429 (a PDB allows no disruption now), as the Eviction subresource does."""
        ns = pod["metadata"]["namespace"]
        budgets = [
            pdb
            for pdb in self.store.all("policy", "poddisruptionbudgets")
            if pdb["metadata"]["namespace"] == ns and _selects(pdb, pod)
        ]
        if len(budgets) > 1:
            raise ApiError(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            )
        if budgets and pod["status"].get("phase") == "Running":
            pdb = budgets[0]
            selected = [p for p in self.store.all("", "pods") if p["metadata"]["namespace"] == ns and _selects(pdb, p)]
            healthy = sum(
                1
                for p in selected
                if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
            )
            spec = pdb["spec"]
            if "minAvailable" in spec:
                needed = int(spec["minAvailable"])
            else:
                needed = len(selected) - int(spec.get("maxUnavailable", 0))
            if healthy - 1 < needed:
                raise ApiError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    {
                        "causes": [
                            {
                                "reason": "DisruptionBudget",
                                "message": f"The disruption budget {pdb['metadata']['name']} needs {needed} healthy "
                                f"pods and has {healthy} currently",
                            }
                        ]
                    },
                )
        if not dry_run:
            self.delete_pod_or_object(self.pods, pod, now, grace)


def _selects(pdb: dict, pod: dict) -> bool:
    selector = (pdb["spec"].get("selector") or {}).get("matchLabels") or {}
    return bool(selector) and label_matcher(",".join(f"{k}={v}" for k, v in selector.items()))(pod)


def _tolerated(taint: dict, pod: dict) -> bool:
    for tol in pod["spec"].get("tolerations") or []:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists" and (not tol.get("key") or tol["key"] == taint["key"]):
            return True
        if tol.get("key") == taint["key"] and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def _condition(kind: str, reason: str, now: datetime, message: str = "", status: str = "True") -> dict:
    out = {"type": kind, "status": status, "lastTransitionTime": timestamp(now)}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def _finished(status: dict) -> bool:
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in status.get("conditions", []))


def _suffix(job: dict, index: int, attempt: int) -> str:
    return hashlib.sha256(f"{job['metadata']['uid']}/{index}/{attempt}".encode()).hexdigest()[:5]
