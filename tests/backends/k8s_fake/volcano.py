"""Volcano: admission webhooks, the Job and PodGroup controllers, and the scheduler's enqueue and allocate actions
with the gang, capacity and network-topology plugins.

- Webhooks (https://volcano.sh/en/docs/vcjob/, pkg/webhooks/admission/jobs/validate/admit_job.go and
  mutate/mutate_job.go): a Job is defaulted (queue `default`, schedulerName `volcano`, minAvailable = all replicas,
  maxRetry 3 when it is unset or 0) and refused unless its queue
  exists, is `Open`, is not `root` and has no child queues; a pod for the volcano scheduler outside a Job is refused
  when the queue in its `scheduling.volcano.sh/queue-name` annotation (default `default`) is missing or closed.
- Controllers: each Job gets a PodGroup (minMember = minAvailable, minTaskMember, queue, priorityClassName,
  minResources of the first minAvailable pods, networkTopology); its pods `<job>-<task>-<index>` are created only
  once the PodGroup is Inqueue. A volcano pod outside a Job is a gang of one in a PodGroup of its own
  (https://volcano.sh/en/docs/podgroup/). A Job is Running while minAvailable pods run, Completed when all pods
  finished and at least minAvailable succeeded, else Failed.
- enqueue (capacity plugin, https://github.com/volcano-sh/volcano/blob/master/docs/design/capacity-scheduling.md
  and hierarchical-queue-on-capacity-plugin.md): a PodGroup becomes Inqueue only if its minResources, plus what the
  queue has allocated and enqueued, stay within `spec.capability` for every resource the capability lists, in the
  queue and each ancestor (`spec.parent`, default `root`); otherwise the PodGroup event "queue resource quota
  insufficient: insufficient <resource>".
- allocate (gang plugin, https://volcano.sh/en/docs/plugins/#gang): the pods are placed together with
  kube-scheduler's filters (scheduler.py) and the queue's capability, and bound only if at least minMember (and each
  task's minAvailable) are placed; otherwise none is bound, each pending pod carries the fit error
  ("0/N nodes are unavailable: ...") and the PodGroup "<pending>/<total> tasks in gang unschedulable: pod group is
  not ready, ...". With `networkTopology.mode: hard`, all of the Job's pods must fit inside one HyperNode whose tier
  is at most `highestTierAllowed` (https://volcano.sh/en/docs/network_topology_aware_scheduling/); HyperNode
  members select nodes by exactMatch, regexMatch or labelMatch, or name HyperNodes of the tier below.

- Lifecycle policies (https://volcano.sh/en/docs/vcjob/ "policies" and "maxRetry"; the job controller's
  pkg/controllers/job/job_controller_util.go applyPolicies, state/running.go and state/restarting.go): a pod that
  fails raises PodFailed (PodEvicted when the kubelet evicted it), matched against the task's policies, then the
  Job's (`event`, `events` or `*`). RestartJob kills every pod, counts a retry and moves the Job to Restarting;
  there, once retryCount reaches maxRetry (default 3) the Job is Failed (the last retry keeps its finished pods),
  otherwise it goes back to Pending and its pods are created anew (a new pod's activeDeadlineSeconds counts from
  its own start). RestartPod deletes the failed pod, which is created again. AbortJob moves the Job to Aborted,
  TerminateJob to Terminated, CompleteJob to Completed. Without a matching policy a failed pod stays failed.

Simplified: no preempt / reclaim actions, no proportion or overcommit plugins, no exitCode or timeout policies; scores
are not modelled (HyperNodes by tier then name, nodes by name); Volcano's vGPU resources (`volcano.sh/vgpu-*`) are
checked as node-level extended resources, not per device. Without any HyperNode a hard network topology cannot
be satisfied (the model does not invent a topology from labels).
"""

from __future__ import annotations

import re
from datetime import datetime
from fractions import Fraction

from tests.backends.k8s_fake import podspec, quantity
from tests.backends.k8s_fake.scheduler import (
    Reason,
    Snapshot,
    condition,
    filter_node,
    histogram,
    is_bound,
    set_condition,
)
from tests.backends.k8s_fake.store import ApiError

SCHEDULER = "volcano"
GROUP_NAME = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
TERMINAL_JOB = {"Completed", "Failed", "Aborted", "Terminated"}


def _denied(webhook: str, message: str) -> ApiError:
    return ApiError(400, "BadRequest", f'admission webhook "{webhook}" denied the request: {message}')


def fit_error(total: int, per_node: dict[str, list[Reason]]) -> str:
    return f"0/{total} nodes are unavailable: {', '.join(histogram(per_node))}."


class Volcano:
    def __init__(self, plane):
        self.plane = plane

    @property
    def queues(self):
        return self.plane.resource("scheduling.volcano.sh", "v1beta1", "queues")

    @property
    def podgroups(self):
        return self.plane.resource("scheduling.volcano.sh", "v1beta1", "podgroups")

    def _queue(self, name: str) -> dict | None:
        return self.plane.store.bucket(self.queues).get(("", name))

    # --- webhooks ------------------------------------------------------------------------------------------

    def _queue_problem(self, name: str) -> str:
        queue = self._queue(name)
        if queue is None:
            return f' unable to find job queue: queues.scheduling.volcano.sh "{name}" not found;'
        state = (queue.get("status") or {}).get("state", "Open")
        if state != "Open":
            return f" can only submit job to queue with state `Open`, queue `{name}` status is `{state}`;"
        return ""

    def admit(self, resource, obj: dict) -> None:
        key = (resource.group, resource.kind)
        if key == ("batch.volcano.sh", "Job"):
            self._admit_job(obj)
        elif key == ("", "Pod") and obj["spec"].get("schedulerName") == SCHEDULER:
            annotations = obj["metadata"].get("annotations") or {}
            if GROUP_NAME in annotations:
                pg = self._podgroup(obj["metadata"].get("namespace", ""), annotations[GROUP_NAME])
                problem = self._queue_problem(self._queue_of(pg)) if pg is not None else ""
            else:
                problem = self._queue_problem(annotations.get(QUEUE_ANNOTATION, "default"))
            if problem:
                raise _denied("validatepod.volcano.sh", problem)

    def _admit_job(self, job: dict) -> None:
        spec = job.setdefault("spec", {})
        spec.setdefault("queue", "default")
        spec.setdefault("schedulerName", SCHEDULER)
        if not spec.get("maxRetry"):  # the mutating webhook's patchDefaultMaxRetry: 0 counts as unset
            spec["maxRetry"] = 3
        tasks = spec.get("tasks") or []
        total = 0
        for index, task in enumerate(tasks):
            task.setdefault("name", f"default{index}")
            task.setdefault("replicas", 1)
            task.setdefault("minAvailable", task["replicas"])
            total += task["replicas"]
        if not spec.get("minAvailable"):
            spec["minAvailable"] = total
        problems = ""
        if spec["minAvailable"] > total:
            problems += "job 'minAvailable' should not be greater than total replicas in tasks;"
        name = spec["queue"]
        problems += self._queue_problem(name)
        if self._queue(name) is not None:
            if name == "root":
                problems += " can not submit job to root queue;"
            children = [
                q
                for q in self.plane.store.all("scheduling.volcano.sh", "queues")
                if (q.get("spec") or {}).get("parent") == name
            ]
            if children:
                problems += f" can only submit job to leaf queue, queue `{name}` has {len(children)} child queues;"
        if problems:
            raise _denied("validatejob.volcano.sh", problems)

    # --- controllers ---------------------------------------------------------------------------------------

    def reconcile(self, now: datetime) -> bool:
        changed = self._queue_states()
        changed |= self._jobs(now)
        changed |= self._plain_pods(now)
        changed |= self._enqueue(now)
        changed |= self._allocate(now)
        changed |= self._podgroup_status(now)
        changed |= self._policies(now)
        changed |= self._job_status(now)
        return changed

    def _policies(self, now: datetime) -> bool:
        """The job controller's reaction to failed pods (see the module's docstring), and Restarting's way out."""
        changed = False
        jobs = self.plane.resource("batch.volcano.sh", "v1alpha1", "jobs")
        for job in self.plane.store.all("batch.volcano.sh", "jobs"):
            status = job.setdefault("status", {})
            phase = (status.get("state") or {}).get("phase", "")
            if job["metadata"].get("deletionTimestamp") or phase in TERMINAL_JOB:
                continue
            pods = [p for p in self.plane.pods_of(job) if not p["metadata"].get("deletionTimestamp")]
            if phase == "Restarting":
                if status.get("retryCount", 0) >= job["spec"].get("maxRetry", 3):
                    self._set_phase(job, "Failed", now)
                elif not self.plane.pods_of(job):  # its pods, terminating ones included, are gone
                    self._set_phase(job, "Pending", now)
                    pg = self._podgroup(job["metadata"]["namespace"], self._pg_name(job))
                    if pg is not None:  # the gang is enqueued again before its pods are created
                        pg["status"] = {"phase": "Pending"}
                        self.plane.save(self.podgroups, pg)
                else:
                    continue
                self.plane.save(jobs, job)
                changed = True
                continue
            for pod in pods:
                if pod["status"].get("phase") != "Failed":
                    continue
                event = "PodEvicted" if pod["status"].get("reason") == "Evicted" else "PodFailed"
                action = self._policy_action(job, pod, event)
                if action is None:
                    continue
                if action == "RestartPod":
                    self.plane.delete(self.plane.pods, pod, now)
                elif action == "RestartJob":
                    # At the last retry the finished pods are kept (PodRetainPhaseSoft): the Job ends Failed with them.
                    last = status.get("retryCount", 0) >= job["spec"].get("maxRetry", 3) - 1
                    status["retryCount"] = status.get("retryCount", 0) + 1
                    for each in pods:
                        if not (last and each["status"].get("phase") in ("Succeeded", "Failed")):
                            self.plane.delete(self.plane.pods, each, now)
                    self._set_phase(job, "Restarting", now, f"{event} on pod {pod['metadata']['name']}")
                    self.plane.save(jobs, job)
                else:
                    ended = {"AbortJob": "Aborted", "TerminateJob": "Terminated", "CompleteJob": "Completed"}
                    if action not in ended:
                        continue
                    for each in pods:
                        if each["status"].get("phase") not in ("Succeeded", "Failed"):
                            self.plane.delete(self.plane.pods, each, now)
                    self._set_phase(job, ended[action], now, f"{event} on pod {pod['metadata']['name']}")
                    self.plane.save(jobs, job)
                changed = True
                break  # one action per Job per pass: RestartJob and the endings act on every pod
        return changed

    @staticmethod
    def _policy_action(job: dict, pod: dict, event: str) -> str | None:
        task_name = (pod["metadata"].get("annotations") or {}).get("volcano.sh/task-spec")
        task = next((t for t in job["spec"].get("tasks") or [] if t.get("name") == task_name), {})
        for policy in [*(task.get("policies") or []), *(job["spec"].get("policies") or [])]:
            events = policy.get("events") or ([policy["event"]] if policy.get("event") else [])
            if event in events or "*" in events:
                return policy.get("action")
        return None

    def _set_phase(self, job: dict, phase: str, now: datetime, message: str = "") -> None:
        state = {"phase": phase, "lastTransitionTime": self.plane.stamp(now)}
        if message:
            state["message"] = message
        job["status"]["state"] = state

    def _queue_states(self) -> bool:
        for queue in self.plane.store.all("scheduling.volcano.sh", "queues"):
            status = queue.setdefault("status", {})
            if "state" not in status:
                status["state"] = "Open"
                self.plane.save(self.queues, queue)
        return False

    def _pg_name(self, job: dict) -> str:
        return f"{job['metadata']['name']}-{job['metadata']['uid']}"

    def _podgroup(self, ns: str, name: str) -> dict | None:
        return self.plane.store.bucket(self.podgroups).get((ns, name))

    def _jobs(self, now: datetime) -> bool:
        changed = False
        for job in self.plane.store.all("batch.volcano.sh", "jobs"):
            phase = ((job.get("status") or {}).get("state") or {}).get("phase", "")
            if job["metadata"].get("deletionTimestamp") or phase in TERMINAL_JOB or phase == "Restarting":
                continue  # a restarting Job's pods are being killed, not created
            ns, spec = job["metadata"]["namespace"], job["spec"]
            pg = self._podgroup(ns, self._pg_name(job))
            if pg is None:
                self._create_podgroup(job)
                changed = True
                continue
            if (pg.get("status") or {}).get("phase", "Pending") == "Pending":
                continue  # pods are created once the PodGroup is enqueued
            existing = {p["metadata"]["name"] for p in self.plane.pods_of(job)}
            for task in spec.get("tasks") or []:
                for index in range(task.get("replicas", 1)):
                    name = f"{job['metadata']['name']}-{task['name']}-{index}"
                    if name in existing:
                        continue
                    changed |= self._create_job_pod(job, task, index, name, pg, now)
        return changed

    def _create_podgroup(self, job: dict) -> None:
        spec = job["spec"]
        min_available = spec.get("minAvailable", 0)
        min_resources: dict[str, Fraction] = {}
        left = min_available
        for task in spec.get("tasks") or []:
            take = min(left, task.get("replicas", 1))
            podspec.add(min_resources, podspec.pod_requests(task["template"].get("spec") or {}), times=take)
            left -= take
        pg = {
            "metadata": {
                "name": self._pg_name(job),
                "annotations": {},
                "ownerReferences": [
                    {
                        "apiVersion": job["apiVersion"],
                        "kind": job["kind"],
                        "name": job["metadata"]["name"],
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "minMember": min_available,
                "minTaskMember": {
                    t["name"]: t.get("minAvailable", t.get("replicas", 1)) for t in spec.get("tasks") or []
                },
                "queue": spec.get("queue", "default"),
                "minResources": {k: quantity.text(k, v) for k, v in sorted(min_resources.items())},
                **({"priorityClassName": spec["priorityClassName"]} if spec.get("priorityClassName") else {}),
                **({"networkTopology": spec["networkTopology"]} if spec.get("networkTopology") else {}),
            },
            "status": {"phase": "Pending"},
        }
        created = self.plane.store.create(self.podgroups, job["metadata"]["namespace"], pg)
        created["status"] = {"phase": "Pending"}

    def _create_job_pod(self, job: dict, task: dict, index: int, name: str, pg: dict, now: datetime) -> bool:
        template = task["template"]
        spec = dict(template.get("spec") or {})
        spec["schedulerName"] = job["spec"].get("schedulerName", SCHEDULER)
        if job["spec"].get("priorityClassName") and not spec.get("priorityClassName"):
            spec["priorityClassName"] = job["spec"]["priorityClassName"]
        meta = template.get("metadata") or {}
        job_name, queue = job["metadata"]["name"], job["spec"].get("queue", "default")
        labels = {
            **(meta.get("labels") or {}),
            "volcano.sh/job-name": job_name,
            "volcano.sh/job-namespace": job["metadata"]["namespace"],
            "volcano.sh/queue-name": queue,
            "volcano.sh/task-spec": task["name"],
            "volcano.sh/task-index": str(index),
        }
        annotations = {
            **(meta.get("annotations") or {}),
            GROUP_NAME: pg["metadata"]["name"],
            "volcano.sh/job-name": job_name,
            "volcano.sh/task-spec": task["name"],
            "volcano.sh/task-index": str(index),
            "volcano.sh/queue-name": queue,
            "volcano.sh/job-version": "0",
        }
        return self.plane.create_pod(
            job, {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}, name, {}, now
        )

    def _plain_pods(self, now: datetime) -> bool:
        """A volcano pod that no Job owns gets a PodGroup of one (the podgroup controller)."""
        changed = False
        for pod in self.plane.store.all("", "pods"):
            annotations = pod["metadata"].get("annotations") or {}
            if pod["spec"].get("schedulerName") != SCHEDULER or GROUP_NAME in annotations or is_bound(pod):
                continue
            name = f"podgroup-{pod['metadata']['uid']}"
            owner = (pod["metadata"].get("ownerReferences") or [None])[0]
            pg = {
                "metadata": {"name": name, **({"ownerReferences": [owner]} if owner else {})},
                "spec": {
                    "minMember": 1,
                    "queue": annotations.get(QUEUE_ANNOTATION, "default"),
                    "minResources": {
                        k: quantity.text(k, v) for k, v in sorted(podspec.pod_requests(pod["spec"]).items())
                    },
                    **(
                        {"priorityClassName": pod["spec"]["priorityClassName"]}
                        if pod["spec"].get("priorityClassName")
                        else {}
                    ),
                },
            }
            if self._podgroup(pod["metadata"]["namespace"], name) is None:
                created = self.plane.store.create(self.podgroups, pod["metadata"]["namespace"], pg)
                created["status"] = {"phase": "Pending"}
            pod["metadata"].setdefault("annotations", {})[GROUP_NAME] = name
            self.plane.save(self.plane.pods, pod)
            changed = True
        return changed

    # --- scheduler: queues -----------------------------------------------------------------------------------

    def _ancestors(self, name: str) -> list[dict]:
        """The queue and its ancestors up to root (hierarchical queues on the capacity plugin)."""
        chain, seen = [], set()
        while name and name not in seen:
            seen.add(name)
            queue = self._queue(name)
            if queue is None:
                break
            chain.append(queue)
            name = (queue.get("spec") or {}).get("parent") or ("root" if name != "root" else "")
        return chain

    def _queue_of(self, pg: dict) -> str:
        return (pg.get("spec") or {}).get("queue", "default")

    def _under(self, pg_queue: str, queue_name: str) -> bool:
        return any(q["metadata"]["name"] == queue_name for q in self._ancestors(pg_queue))

    def _allocated(self, queue_name: str, extra: list[dict] = ()) -> dict[str, Fraction]:
        """What bound, unfinished pods of PodGroups in the queue (or below it) request, plus tentative pods."""
        total: dict[str, Fraction] = {}
        groups = {
            (pg["metadata"]["namespace"], pg["metadata"]["name"]): pg
            for pg in self.plane.store.all("scheduling.volcano.sh", "podgroups")
        }
        tentative = {id(p) for p in extra}
        for pod in self.plane.store.all("", "pods"):
            if not is_bound(pod) and id(pod) not in tentative:
                continue
            annotations = pod["metadata"].get("annotations") or {}
            pg = groups.get((pod["metadata"].get("namespace"), annotations.get(GROUP_NAME)))
            if pg is not None and self._under(self._queue_of(pg), queue_name):
                podspec.add(total, podspec.pod_requests(pod["spec"]))
        return total

    def _inqueue(self, queue_name: str) -> dict[str, Fraction]:
        total: dict[str, Fraction] = {}
        for pg in self.plane.store.all("scheduling.volcano.sh", "podgroups"):
            if (pg.get("status") or {}).get("phase") == "Inqueue" and self._under(self._queue_of(pg), queue_name):
                bound = [p for p in self._pods_of_group(pg) if is_bound(p)]
                if not bound:
                    podspec.add(
                        total, {k: quantity.parse(v) for k, v in (pg["spec"].get("minResources") or {}).items()}
                    )
        return total

    def _over_capability(self, queue: dict, wanted: dict[str, Fraction]) -> list[str]:
        capability = {k: quantity.parse(v) for k, v in ((queue.get("spec") or {}).get("capability") or {}).items()}
        return sorted(name for name, cap in capability.items() if wanted.get(name, Fraction(0)) > cap)

    def _pods_of_group(self, pg: dict) -> list[dict]:
        ns, name = pg["metadata"]["namespace"], pg["metadata"]["name"]
        return [
            p
            for p in self.plane.store.all("", "pods")
            if p["metadata"].get("namespace") == ns and (p["metadata"].get("annotations") or {}).get(GROUP_NAME) == name
        ]

    def _priority(self, pg: dict) -> int:
        name = (pg.get("spec") or {}).get("priorityClassName")
        for pc in self.plane.store.all("scheduling.k8s.io", "priorityclasses"):
            if pc["metadata"]["name"] == name:
                return int(pc.get("value", 0))
        return 0

    def _ordered(self, phases: set[str]) -> list[dict]:
        groups = [
            pg
            for pg in self.plane.store.all("scheduling.volcano.sh", "podgroups")
            if (pg.get("status") or {}).get("phase", "Pending") in phases
            and not pg["metadata"].get("deletionTimestamp")
        ]
        return sorted(
            groups, key=lambda pg: (-self._priority(pg), pg["metadata"]["creationTimestamp"], pg["metadata"]["name"])
        )

    def _enqueue(self, now: datetime) -> bool:
        changed = False
        for pg in self._ordered({"Pending"}):
            queue_name = self._queue_of(pg)
            if self._queue(queue_name) is None:
                continue  # a PodGroup in a missing queue is never scheduled
            wanted = {k: quantity.parse(v) for k, v in (pg["spec"].get("minResources") or {}).items()}
            short: list[str] = []
            for queue in self._ancestors(queue_name):
                name = queue["metadata"]["name"]
                total = podspec.add(podspec.add(dict(wanted), self._allocated(name)), self._inqueue(name))
                short = self._over_capability(queue, total)
                if short:
                    break
            if short:
                text = "queue resource quota insufficient: " + ", ".join(f"insufficient {r}" for r in short)
                self.plane.event(now, pg, "Unschedulable", text, "Normal")
                continue
            pg["status"]["phase"] = "Inqueue"
            self.plane.save(self.podgroups, pg)
            changed = True
        return changed

    # --- scheduler: allocate (gang) ----------------------------------------------------------------------------

    def _hypernode_sets(self) -> list[tuple[int, str, set[str]]]:
        hypernodes = self.plane.resource("topology.volcano.sh", "v1alpha1", "hypernodes")
        if hypernodes is None:
            return []
        objs = {h["metadata"]["name"]: h for h in self.plane.store.all("topology.volcano.sh", "hypernodes")}
        nodes = self.plane.store.all("", "nodes")

        def members(name: str, seen: frozenset = frozenset()) -> set[str]:
            out: set[str] = set()
            for member in (objs[name].get("spec") or {}).get("members") or []:
                selector = member.get("selector") or {}
                exact = (selector.get("exactMatch") or {}).get("name")
                if member.get("type") == "HyperNode":
                    if exact in objs and exact not in seen:
                        out |= members(exact, seen | {name})
                    continue
                for node in nodes:
                    node_name = node["metadata"]["name"]
                    labels = node["metadata"].get("labels") or {}
                    if (
                        (exact is not None and node_name == exact)
                        or (
                            "regexMatch" in selector
                            and re.fullmatch(selector["regexMatch"].get("pattern", ""), node_name)
                        )
                        or ("labelMatch" in selector and podspec.selector_matches(selector["labelMatch"], labels))
                    ):
                        out.add(node_name)
            return out

        return sorted((int((h.get("spec") or {}).get("tier", 1)), name, members(name)) for name, h in objs.items())

    def _allocate(self, now: datetime) -> bool:
        changed = False
        for pg in self._ordered({"Inqueue", "Running"}):
            pods = [p for p in self._pods_of_group(pg) if not p["metadata"].get("deletionTimestamp")]
            pending = sorted(
                (
                    p
                    for p in pods
                    if not p["spec"].get("nodeName")
                    and p["status"].get("phase", "Pending") == "Pending"
                    and p["spec"].get("schedulerName") == SCHEDULER
                    and not p["spec"].get("schedulingGates")
                ),
                key=lambda p: p["metadata"]["name"],
            )
            if not pending:
                continue
            changed |= self._allocate_group(pg, pods, pending, now)
        return changed

    def _allocate_group(self, pg: dict, pods: list[dict], pending: list[dict], now: datetime) -> bool:
        snapshot = self.plane.snapshot()
        bound = [p for p in pods if is_bound(p) or (p["status"].get("phase") == "Succeeded")]
        topology = pg["spec"].get("networkTopology") or {}
        if topology.get("mode") == "hard":
            highest = int(topology.get("highestTierAllowed", 1))
            used = {p["spec"]["nodeName"] for p in bound if p["spec"].get("nodeName")}
            domains = [
                (tier, name, members)
                for tier, name, members in self._hypernode_sets()
                if tier <= highest and used <= members
            ]
        else:
            domains = [(0, "", set(snapshot.nodes))]
        last_errors: dict[str, str] = {}
        for _, _, members in domains:
            placed, errors = self._simulate(pg, pending, snapshot, members)
            last_errors = errors
            if self._gang_ready(pg, bound, placed):
                stamp = self.plane.stamp(now)
                for pod, node in placed:
                    pod["spec"]["nodeName"] = node
                    set_condition(pod, condition("PodScheduled", "True", stamp))
                    self.plane.save(self.plane.pods, pod)
                return bool(placed)
        self._unschedulable(pg, pods, pending, last_errors, bool(domains), now)
        return False

    def _simulate(self, pg: dict, pending: list[dict], snapshot: Snapshot, members: set[str]) -> tuple[list, dict]:
        placed: list[tuple[dict, str]] = []
        errors: dict[str, str] = {}
        chain = self._ancestors(self._queue_of(pg))
        for pod in pending:
            tentative = [p for p, _ in placed]
            wanted = podspec.pod_requests(pod["spec"])
            if any(
                self._over_capability(q, podspec.add(dict(wanted), self._allocated(q["metadata"]["name"], tentative)))
                for q in chain
            ):
                errors[pod["metadata"]["uid"]] = "queue resource quota insufficient"
                continue
            per_node: dict[str, list[Reason]] = {}
            chosen = None
            for name, info in snapshot.nodes.items():
                if name not in members:
                    per_node[name] = [Reason("node(s) didn't match the job's network topology (HyperNode)", True)]
                    continue
                reasons = filter_node(pod, info, snapshot)
                if not reasons:
                    chosen = name
                    break
                per_node[name] = reasons
            if chosen is None:
                errors[pod["metadata"]["uid"]] = fit_error(len(snapshot.nodes), per_node)
                continue
            snapshot.assume(pod, chosen)
            placed.append((pod, chosen))
        for pod, node in placed:  # leave the snapshot as it was: the caller binds for real or not at all
            snapshot.forget(pod, node)
        return placed, errors

    def _gang_ready(self, pg: dict, bound: list[dict], placed: list) -> bool:
        if len(bound) + len(placed) < pg["spec"].get("minMember", 1):
            return False
        tasks = pg["spec"].get("minTaskMember") or {}
        if pg["spec"].get("minMember", 1) < sum(tasks.values()):
            return True  # an elastic job: the job's minAvailable prevails over its tasks' (JobInfo.CheckTaskReady)
        per_task: dict[str, int] = {}
        for pod in [*bound, *(p for p, _ in placed)]:
            task = (pod["metadata"].get("annotations") or {}).get("volcano.sh/task-spec", "")
            per_task[task] = per_task.get(task, 0) + 1
        return all(per_task.get(task, 0) >= need for task, need in tasks.items())

    def _unschedulable(self, pg, pods, pending, errors: dict[str, str], any_domain: bool, now: datetime) -> None:
        stamp = self.plane.stamp(now)
        total = len(self.plane.store.all("", "nodes"))
        reasons: dict[str, int] = {}
        for pod in pending:
            text = errors.get(pod["metadata"]["uid"])
            if text is None and not any_domain:
                text = f"0/{total} nodes are unavailable: no HyperNode within the job's highestTierAllowed."
            why = "Unschedulable" if text else "Schedulable"
            reasons[why] = reasons.get(why, 0) + 1
            if text and set_condition(pod, condition("PodScheduled", "False", stamp, "Unschedulable", text)):
                self.plane.save(self.plane.pods, pod)
                self.plane.event(now, pod, "FailedScheduling", text)
        status_counts: dict[str, int] = {"Pending": len(pending), "minAvailable": pg["spec"].get("minMember", 1)}
        running = sum(1 for p in pods if is_bound(p))
        if running:
            status_counts["Running"] = running
        summary = ", ".join(sorted(f"{v} {k}" for k, v in status_counts.items()))
        detail = ", ".join(sorted(f"{v} {k}" for k, v in reasons.items()))
        text = (
            f"{len(pending)}/{len(pods)} tasks in gang unschedulable: pod group is not ready, {summary}; "
            f"Pending: {detail}."
        )
        conditions = [c for c in pg["status"].get("conditions") or [] if c["type"] != "Unschedulable"]
        old = next((c for c in pg["status"].get("conditions") or [] if c["type"] == "Unschedulable"), {})
        if old.get("message") != text:
            pg["status"]["conditions"] = [
                *conditions,
                {**condition("Unschedulable", "True", stamp, "NotEnoughResources", text)},
            ]
            self.plane.save(self.podgroups, pg)
            self.plane.event(now, pg, "Unschedulable", text)

    # --- status ------------------------------------------------------------------------------------------------

    def _podgroup_status(self, now: datetime) -> bool:
        changed = False
        for pg in self.plane.store.all("scheduling.volcano.sh", "podgroups"):
            status = pg.setdefault("status", {"phase": "Pending"})
            if status.get("phase", "Pending") == "Pending":
                continue
            pods = self._pods_of_group(pg)
            running = sum(1 for p in pods if p["status"].get("phase") == "Running")
            succeeded = sum(1 for p in pods if p["status"].get("phase") == "Succeeded")
            failed = sum(1 for p in pods if p["status"].get("phase") == "Failed")
            phase = status["phase"]
            if running + succeeded >= pg["spec"].get("minMember", 1) and running:
                phase = "Running"
            elif pods and running == 0 and succeeded + failed == len(pods):
                phase = "Completed"
            new = {**status, "phase": phase, "running": running, "succeeded": succeeded, "failed": failed}
            if phase == "Running":
                new["conditions"] = [c for c in status.get("conditions") or [] if c["type"] != "Unschedulable"] + (
                    []
                    if any(c["type"] == "Scheduled" for c in status.get("conditions") or [])
                    else [
                        condition("Scheduled", "True", self.plane.stamp(now), "tasks in gang are ready to be scheduled")
                    ]
                )
            if new != status:
                pg["status"] = new
                self.plane.save(self.podgroups, pg)
                changed = True
        for queue in self.plane.store.all("scheduling.volcano.sh", "queues"):
            name = queue["metadata"]["name"]
            allocated = self._allocated(name)
            status = {
                **(queue.get("status") or {}),
                "allocated": {k: quantity.text(k, v) for k, v in sorted(allocated.items())},
            }
            if status != queue.get("status"):
                queue["status"] = status
                self.plane.save(self.queues, queue)
        return changed

    def _job_status(self, now: datetime) -> bool:
        changed = False
        for job in self.plane.store.all("batch.volcano.sh", "jobs"):
            status = job.setdefault("status", {})
            phase = (status.get("state") or {}).get("phase", "")
            if job["metadata"].get("deletionTimestamp") or phase in TERMINAL_JOB or phase == "Restarting":
                continue
            spec = job["spec"]
            total = sum(t.get("replicas", 1) for t in spec.get("tasks") or [])
            pods = self.plane.pods_of(job)
            count = {
                p: sum(1 for x in pods if x["status"].get("phase") == p) for p in ("Running", "Succeeded", "Failed")
            }
            pending = sum(1 for x in pods if x["status"].get("phase", "Pending") == "Pending")
            minimum = spec.get("minAvailable", total)
            if pods and count["Succeeded"] + count["Failed"] == total:
                new_phase = "Completed" if count["Succeeded"] >= minimum else "Failed"
            elif count["Running"] + count["Succeeded"] >= minimum and count["Running"]:
                new_phase = "Running"
            else:
                new_phase = phase or "Pending"
            new = {
                **status,
                "state": {"phase": new_phase, "lastTransitionTime": self.plane.stamp(now)}
                if new_phase != phase
                else status.get("state"),
                "pending": pending,
                "running": count["Running"],
                "succeeded": count["Succeeded"],
                "failed": count["Failed"],
                "minAvailable": minimum,
            }
            if new != status:
                job["status"] = new
                self.plane.save(self.plane.resource("batch.volcano.sh", "v1alpha1", "jobs"), job)
                changed = True
        return changed
