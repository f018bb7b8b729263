"""The workload controllers that create pods, and the kubelet that runs them.

- Job (https://kubernetes.io/docs/concepts/workloads/controllers/job/): up to `parallelism` pods at a time until
  `completions` succeed (pods `<job>-<index>-<suffix>` with the completion-index label); a suspended Job has no
  active pods (https://kubernetes.io/docs/concepts/workloads/controllers/job/#suspending-a-job); `backoffLimit` and
  `activeDeadlineSeconds` fail it.
- Deployment: `replicas` pods named as a ReplicaSet's would be (no ReplicaSet object; a changed template replaces
  the pods at once, as `strategy: Recreate` does); finished pods are replaced.
- LeaderWorkerSet (https://lws.sigs.k8s.io/docs/reference/labels-annotations-and-environment-variables/,
  .../concepts/leaderworkerset/group-identity/): per group a leader `<name>-<group>` and workers
  `<name>-<group>-<index>`, with the name / group-index / worker-index / group-key labels, the size and
  leader-name annotations, `LWS_LEADER_ADDRESS` (`<leader>.<name>.<namespace>`, through the headless Service the
  controller creates), `LWS_GROUP_SIZE` and `LWS_WORKER_INDEX`; with `startupPolicy: LeaderReady` workers wait for
  a running leader. A group is ready when all its pods run. With the controller's
  `gangSchedulingManagement.schedulerProvider: volcano` (opt-in, https://lws.sigs.k8s.io/docs/installation/ and
  its Volcano provider), each group gets a Volcano PodGroup `<name>-<group>-<revision>` (minMember = size, or 1 with
  LeaderReady; minResources of the whole group; the queue of the LeaderWorkerSet's
  `scheduling.volcano.sh/queue-name` annotation) and every pod the `scheduling.k8s.io/group-name` annotation.
- kubelet: a bound pod runs at once (once its images are pulled, when the fake models pulls: images.py; its init
  containers complete at once) and ends when the `sleep N` of its command has passed on the fake clock (a
  command with `false` fails), or fails with reason DeadlineExceeded once its `activeDeadlineSeconds` has passed
  first; a deleted pod goes away after its grace period. The NVIDIA device plugin's Allocate runs first: on a node
  shared with MPS (nvidia.com/gpu.sharing-strategy mps) it refuses a container that asks for more than one
  replica, since MPS forces failRequestsGreaterThanOne (https://docs.nvidia.com/datacenter/cloud-native/
  gpu-operator/latest/gpu-sharing-mps.html#limitations), and the kubelet fails the pod with reason
  UnexpectedAdmissionError and the plugin's error (https://github.com/NVIDIA/k8s-device-plugin#with-cuda-time-slicing).
  Not modelled: time-slicing's own failRequestsGreaterThanOne (off by default).
"""

from __future__ import annotations

import copy
import hashlib
from datetime import datetime, timedelta

from tests.backends.k8s_fake import podspec
from tests.backends.k8s_fake.store import ApiError, parse_time, timestamp

TERMINAL = {"Succeeded", "Failed"}
LWS = "leaderworkerset.sigs.k8s.io"


def _condition(kind: str, reason: str, now: datetime, message: str = "", status: str = "True") -> dict:
    out = {"type": kind, "status": status, "lastTransitionTime": timestamp(now)}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def finished(status: dict) -> bool:
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in status.get("conditions", []))


def _suffix(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:5]


def jobs(plane, now: datetime) -> bool:
    resource = plane.resource("batch", "v1", "jobs")
    changed = False
    for job in plane.store.all("batch", "jobs"):
        spec, status = job["spec"], job.setdefault("status", {})
        if job["metadata"].get("deletionTimestamp") or finished(status):
            continue
        pods = plane.pods_of(job)
        succeeded = {
            p["metadata"]["labels"].get("batch.kubernetes.io/job-completion-index")
            for p in pods
            if p["status"].get("phase") == "Succeeded"
        }
        failed = sum(1 for p in pods if p["status"].get("phase") == "Failed")
        active = [
            p for p in pods if p["status"].get("phase") not in TERMINAL and not p["metadata"].get("deletionTimestamp")
        ]
        completions = spec.get("completions", 1)
        new = {
            **status,
            "active": len(active),
            "succeeded": len(succeeded),
            "failed": failed,
            "ready": sum(1 for p in active if p["status"].get("phase") == "Running"),
        }
        if spec.get("suspend"):
            for pod in active:
                plane.delete(plane.pods, pod, now)
                changed = True
            new["active"] = new["ready"] = 0
            new.pop("startTime", None)
            new.setdefault("conditions", [])
            if not any(c["type"] == "Suspended" and c["status"] == "True" for c in new["conditions"]):
                new["conditions"] = [c for c in new["conditions"] if c["type"] != "Suspended"] + [
                    _condition("Suspended", "JobSuspended", now, "Job suspended")
                ]
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
                    _condition("Failed", "BackoffLimitExceeded", now, "Job has reached the specified backoff limit"),
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
                    name = (
                        f"{job['metadata']['name']}-{index}-{_suffix(job['metadata']['uid'] + f'/{index}/{len(pods)}')}"
                    )
                    labels = {
                        "batch.kubernetes.io/controller-uid": job["metadata"]["uid"],
                        "batch.kubernetes.io/job-name": job["metadata"]["name"],
                        "controller-uid": job["metadata"]["uid"],
                        "job-name": job["metadata"]["name"],
                        "batch.kubernetes.io/job-completion-index": str(index),
                    }
                    if plane.create_pod(job, spec["template"], name, labels, now):
                        active.append({"metadata": {"labels": labels}, "status": {}})
                        changed = True
                    else:
                        break
            if finished(new):
                for pod in active:
                    if pod.get("metadata", {}).get("uid"):
                        plane.delete(plane.pods, pod, now)
        if new != status:
            job["status"] = new
            plane.save(resource, job)
            changed = True
    return changed


def deployments(plane, now: datetime) -> bool:
    resource = plane.resource("apps", "v1", "deployments")
    changed = False
    for deploy in plane.store.all("apps", "deployments"):
        if deploy["metadata"].get("deletionTimestamp"):
            continue
        template_hash = hashlib.sha256(repr(deploy["spec"]["template"]).encode()).hexdigest()[:10]
        pods = [p for p in plane.pods_of(deploy) if not p["metadata"].get("deletionTimestamp")]
        for pod in pods:
            old = pod["metadata"].get("labels", {}).get("pod-template-hash") != template_hash
            if old or pod["status"].get("phase") in TERMINAL:
                plane.delete(plane.pods, pod, now)
                changed = True
        pods = [p for p in plane.pods_of(deploy) if not p["metadata"].get("deletionTimestamp")]
        wanted = deploy["spec"].get("replicas", 1)
        surplus = sorted(pods, key=lambda p: (bool(p["spec"].get("nodeName")), p["metadata"]["creationTimestamp"]))
        for pod in surplus[: max(0, len(pods) - wanted)]:
            plane.delete(plane.pods, pod, now)
            changed = True
        for _ in range(len(pods), wanted):
            plane.deployment_pods += 1
            seed = f"{deploy['metadata']['uid']}/{plane.deployment_pods}"
            name = f"{deploy['metadata']['name']}-{template_hash}-{_suffix(seed)}"
            if not plane.create_pod(
                deploy, deploy["spec"]["template"], name, {"pod-template-hash": template_hash}, now
            ):
                break
            changed = True
        pods = [p for p in plane.pods_of(deploy) if not p["metadata"].get("deletionTimestamp")]
        ready = sum(1 for p in pods if p["status"].get("phase") == "Running")
        status = {
            "observedGeneration": deploy["metadata"].get("generation", 1),
            "replicas": len(pods),
            "updatedReplicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True" if ready >= wanted else "False",
                    "reason": "MinimumReplicasAvailable" if ready >= wanted else "MinimumReplicasUnavailable",
                    "message": "Deployment has minimum availability."
                    if ready >= wanted
                    else "Deployment does not have minimum availability.",
                }
            ],
        }
        if deploy.get("status") != status:
            deploy["status"] = status
            plane.save(resource, deploy)
            changed = True
    return changed


def _env(template: dict, extra: list[dict]) -> dict:
    template = copy.deepcopy(template)
    for container in (template.get("spec") or {}).get("containers") or []:
        names = {e["name"] for e in extra}
        container["env"] = [*extra, *[e for e in container.get("env") or [] if e["name"] not in names]]
    return template


def leader_worker_sets(plane, now: datetime) -> bool:
    resource = plane.resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
    if resource is None:
        return False
    changed = False
    for lws in plane.store.all("leaderworkerset.x-k8s.io", "leaderworkersets"):
        if lws["metadata"].get("deletionTimestamp"):
            continue
        name, ns = lws["metadata"]["name"], lws["metadata"]["namespace"]
        changed |= _headless_service(plane, lws)
        spec = lws["spec"]
        template = spec["leaderWorkerTemplate"]
        size = template.get("size", 1)
        revision = hashlib.sha256(repr(template).encode()).hexdigest()[:10]
        pods = {p["metadata"]["name"]: p for p in plane.pods_of(lws) if not p["metadata"].get("deletionTimestamp")}
        wanted = spec.get("replicas", 1)
        for pod in pods.values():
            group = int(pod["metadata"]["labels"].get(f"{LWS}/group-index", "0"))
            if group >= wanted or pod["status"].get("phase") in TERMINAL:
                plane.delete(plane.pods, pod, now)
                changed = True
        ready_groups = 0
        for group in range(wanted):
            leader = f"{name}-{group}"
            group_key = hashlib.sha256(f"{ns}/{name}/{group}".encode()).hexdigest()[:40]
            members = [(leader, template.get("leaderTemplate") or template["workerTemplate"], 0)]
            members += [(f"{leader}-{i}", template["workerTemplate"], i) for i in range(1, size)]
            leader_running = pods.get(leader, {}).get("status", {}).get("phase") == "Running"
            for pod_name, pod_template, index in members:
                if pod_name in pods:
                    continue
                if index and spec.get("startupPolicy") == "LeaderReady" and not leader_running:
                    continue
                labels = {
                    f"{LWS}/name": name,
                    f"{LWS}/group-index": str(group),
                    f"{LWS}/worker-index": str(index),
                    f"{LWS}/group-key": group_key,
                    f"{LWS}/template-revision-hash": revision,
                }
                env = [
                    {"name": "LWS_LEADER_ADDRESS", "value": f"{leader}.{name}.{ns}"},
                    {"name": "LWS_GROUP_SIZE", "value": str(size)},
                    {"name": "LWS_WORKER_INDEX", "value": str(index)},
                ]
                annotated = _env(pod_template, env)
                annotated.setdefault("metadata", {}).setdefault("annotations", {})[f"{LWS}/size"] = str(size)
                if plane.lws_gang == "volcano":
                    group_name = f"{name}-{group}-{revision}"
                    _volcano_pod_group(plane, lws, group_name, size, revision)
                    annotated["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = group_name
                if index:
                    annotated["metadata"]["annotations"][f"{LWS}/leader-name"] = leader
                annotated["spec"].setdefault("hostname", pod_name)
                annotated["spec"].setdefault("subdomain", name)
                if plane.create_pod(lws, annotated, pod_name, labels, now):
                    changed = True
            if all(pods.get(n, {}).get("status", {}).get("phase") == "Running" for n, _, _ in members):
                ready_groups += 1
        status = {
            "replicas": wanted,
            "readyReplicas": ready_groups,
            "updatedReplicas": wanted,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True" if ready_groups >= wanted else "False",
                    "reason": "AllGroupsReady" if ready_groups >= wanted else "GroupsNotReady",
                }
            ],
        }
        if lws.get("status") != status:
            lws["status"] = status
            plane.save(resource, lws)
            changed = True
    return changed


def _volcano_pod_group(plane, lws: dict, name: str, size: int, revision: str) -> None:
    """The LWS controller's Volcano provider: one PodGroup per group (created before its pods here)."""
    from tests.backends.k8s_fake import podspec, quantity

    podgroups = plane.resource("scheduling.volcano.sh", "v1beta1", "podgroups")
    ns = lws["metadata"]["namespace"]
    if podgroups is None or plane.store.bucket(podgroups).get((ns, name)) is not None:
        return
    template = lws["spec"]["leaderWorkerTemplate"]
    total = podspec.pod_requests((template.get("leaderTemplate") or template["workerTemplate"])["spec"])
    podspec.add(total, podspec.pod_requests(template["workerTemplate"]["spec"]), times=size - 1)
    annotations = lws["metadata"].get("annotations") or {}
    created = plane.store.create(
        podgroups,
        ns,
        {
            "metadata": {
                "name": name,
                "labels": {f"{LWS}/name": lws["metadata"]["name"], f"{LWS}/template-revision-hash": revision},
                "annotations": {k: v for k, v in annotations.items() if k.startswith("volcano.sh/")},
                "ownerReferences": [plane.owner_ref(lws)],
            },
            "spec": {
                "minMember": 1 if lws["spec"].get("startupPolicy") == "LeaderReady" else size,
                "minResources": {k: quantity.text(k, v) for k, v in sorted(total.items())},
                "queue": annotations.get("scheduling.volcano.sh/queue-name", "default"),
            },
        },
    )
    created["status"] = {"phase": "Pending"}


def _headless_service(plane, lws: dict) -> bool:
    services = plane.resource("", "v1", "services")
    ns, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
    if plane.store.bucket(services).get((ns, name)) is not None:
        return False
    plane.store.create(
        services,
        ns,
        {
            "metadata": {"name": name, "ownerReferences": [plane.owner_ref(lws)]},
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {f"{LWS}/name": name},
            },
        },
    )
    return True


def _run_seconds(pod: dict) -> tuple[float | None, bool]:
    """(seconds the main container runs, whether it fails): from a `sleep N` in its command and args."""
    container = pod["spec"]["containers"][0]
    argv = [str(a).replace("$$", "$") for a in [*(container.get("command") or []), *(container.get("args") or [])]]
    words = [w for arg in argv for w in arg.replace(";", " ").replace("&&", " ").split()]
    seconds = None
    for i, word in enumerate(words[:-1]):
        if word == "sleep":
            try:
                seconds = float(words[i + 1])
            except ValueError:
                seconds = None
    return seconds, "false" in words


def kubelet(plane, now: datetime) -> bool:
    changed = False
    for pod in list(plane.store.all("", "pods")):
        meta, status = pod["metadata"], pod["status"]
        if meta.get("deletionTimestamp"):
            if now >= parse_time(meta["deletionTimestamp"]):
                plane.store.remove(plane.pods, meta["namespace"], meta["name"])
                changed = True
            continue
        if not pod["spec"].get("nodeName"):
            continue
        if status.get("phase", "Pending") == "Pending" and (refusal := _allocate_refusal(plane, pod)):
            status.update(phase="Failed", reason="UnexpectedAdmissionError", message=refusal)
            plane.save(plane.pods, pod)
            plane.event(now, pod, "UnexpectedAdmissionError", refusal)
            changed = True
        elif status.get("phase", "Pending") == "Pending":
            waiting = plane.images.waiting(plane, pod, now) if plane.images is not None else ""
            if waiting:
                changed |= _wait_for_images(plane, pod, waiting, now)
                continue
            status.update(
                phase="Running",
                startTime=status.get("startTime") or timestamp(now),
                containerStatuses=[
                    {"name": c["name"], "ready": True, "state": {"running": {"startedAt": timestamp(now)}}}
                    for c in pod["spec"]["containers"]
                ],
            )
            if pod["spec"].get("initContainers"):
                # Init containers run to completion, in order, before the containers start; their run time is not
                # modelled (https://kubernetes.io/docs/concepts/workloads/pods/init-containers/).
                status["initContainerStatuses"] = [
                    {
                        "name": c["name"],
                        "ready": True,
                        "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": timestamp(now)}},
                    }
                    for c in pod["spec"]["initContainers"]
                ]
            started_types = ("Initialized", "Ready", "ContainersReady")
            conditions = [c for c in status.get("conditions") or [] if c["type"] not in started_types]
            status["conditions"] = [*conditions, *(_condition(kind, "", now) for kind in started_types)]
            plane.save(plane.pods, pod)
            changed = True
        elif status.get("phase") == "Running":
            seconds, fails = _run_seconds(pod)
            started = parse_time(_containers_started(status) or status["startTime"])
            deadline = pod["spec"].get("activeDeadlineSeconds")
            deadline_at = started + timedelta(seconds=deadline) if deadline else None
            ends = started + timedelta(seconds=seconds) if seconds is not None else None
            if deadline_at and now >= deadline_at and (ends is None or ends > deadline_at):
                # Past the pod's activeDeadlineSeconds (counted from its startTime) the kubelet kills its containers
                # and fails it: phase Failed, reason DeadlineExceeded
                # (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#lifecycle).
                exit_containers(pod, deadline_at, 137)
                status.update(
                    reason="DeadlineExceeded", message="Pod was active on the node longer than the specified deadline"
                )
                plane.save(plane.pods, pod)
                changed = True
            elif seconds is not None and now >= started + timedelta(seconds=seconds):
                exit_containers(pod, started + timedelta(seconds=seconds), 1 if fails else 0)
                plane.save(plane.pods, pod)
                changed = True
    return changed


SHARED_GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")  # as advertised, and with renameByDefault


def _allocate_refusal(plane, pod: dict) -> str:
    """The device plugin's Allocate error, as the kubelet words it, for a container of `pod` on its node; ""
    when every container is allocated."""
    try:
        node = plane.store.get(plane.nodes, "", pod["spec"]["nodeName"])
    except ApiError:
        return ""
    if (node["metadata"].get("labels") or {}).get("nvidia.com/gpu.sharing-strategy") != "mps":
        return ""
    for container in pod["spec"].get("containers") or []:
        wanted = podspec.container_requests(container)
        for name in SHARED_GPU_RESOURCES:
            if wanted.get(name, 0) > 1:
                return (
                    f"Allocate failed due to rpc error: code = Unknown desc = request for '{name}: "
                    f"{wanted[name]}' too large: maximum request size for shared resources is 1, which is unexpected"
                )
    return ""


def _containers_started(status: dict) -> str:
    """When the pod's first container started running (its startTime is earlier when images were pulled first)."""
    starts = [(c.get("state") or {}).get("running", {}).get("startedAt") for c in status.get("containerStatuses") or []]
    return min((s for s in starts if s), default="")


def _wait_for_images(plane, pod: dict, reason: str, now: datetime) -> bool:
    """The kubelet has the pod (startTime: acknowledged, before its images are pulled) and its containers wait."""
    status = pod["status"]
    waiting = {"waiting": {"reason": reason}}
    new = {
        **status,
        "startTime": status.get("startTime") or timestamp(now),
        "containerStatuses": [{"name": c["name"], "ready": False, "state": waiting} for c in pod["spec"]["containers"]],
    }
    if new == status:
        return False
    pod["status"] = new
    plane.save(plane.pods, pod)
    return True


def exit_containers(pod: dict, at: datetime, code: int) -> None:
    """The kubelet's report of a pod whose containers exited with `code` at `at` (restartPolicy Never): phase
    Succeeded on 0, else Failed, each container terminated with reason Completed or Error
    (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-phase)."""
    status = pod["status"]
    status["phase"] = "Failed" if code else "Succeeded"
    status["conditions"] = [
        dict(c, status="False") if c["type"] in ("Ready", "ContainersReady") else c
        for c in status.get("conditions") or []
    ]
    status["containerStatuses"] = [
        {
            "name": c["name"],
            "ready": False,
            "state": {
                "terminated": {
                    "exitCode": code,
                    "reason": "Error" if code else "Completed",
                    "startedAt": status["startTime"],
                    "finishedAt": timestamp(at),
                }
            },
        }
        for c in pod["spec"]["containers"]
    ]
