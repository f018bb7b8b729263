"""Kueue: Workloads for queued Jobs, Deployment pods and LeaderWorkerSet groups, admitted through a LocalQueue
into a ClusterQueue's quota, or left pending with the reason Kueue gives.

- Queue selection: the label `kueue.x-k8s.io/queue-name` names a LocalQueue in the workload's own namespace
  (https://kueue.sigs.k8s.io/docs/concepts/local_queue/); the LocalQueue's `spec.clusterQueue` names the
  ClusterQueue, whose `namespaceSelector` must select the namespace (null selects nothing, `{}` everything:
  the ClusterQueue CRD's field description). Missing ones leave the Workload `QuotaReserved=False` with reason
  `Inadmissible` and "LocalQueue <name> doesn't exist" / "ClusterQueue <name> doesn't exist"
  (pkg/controller/core/workload_controller.go); a ClusterQueue that names a missing ResourceFlavor is inactive.
- Quota: every requested resource must be covered by a resource group of the ClusterQueue, in a flavor whose
  nodeLabels match the pod's node affinity and whose nodeTaints it tolerates, with unused quota (kueue_quota.py).
  The Kueue Configuration's `resources.excludeResourcePrefixes` drops resources before that, and
  `resources.transformations` turns inputs into outputs
  (https://kueue.sigs.k8s.io/docs/tasks/manage/administer_cluster_quotas/#exclude-arbitrary-resources-in-quota-management,
  https://kueue.sigs.k8s.io/docs/tasks/run/using_hami/). The default configuration has neither.
- Admission injects the assigned flavors' nodeLabels into the pod template's nodeSelector and their
  tolerations, then unsuspends the Job (https://kueue.sigs.k8s.io/docs/concepts/resource_flavor/); a Deployment's
  pods (the pod integration: each pod its own Workload, held by the `kueue.x-k8s.io/admission` scheduling gate,
  https://kueue.sigs.k8s.io/docs/tasks/run/deployment/) and a LeaderWorkerSet's groups (one Workload per group,
  pod sets "leader" and "workers", https://kueue.sigs.k8s.io/docs/tasks/run/leaderworkerset/) are ungated.
- Order and preemption: WorkloadPriorityClass (label `kueue.x-k8s.io/priority-class`), else the pods'
  PriorityClass, orders a ClusterQueue (priority, then creation; StrictFIFO blocks behind its head,
  BestEffortFIFO does not: https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#queueing-strategy); a class that
  does not exist means no Workload is created
  (https://kueue.sigs.k8s.io/docs/concepts/workload_priority_class/). `preemption.withinClusterQueue` evicts
  lower-priority Workloads of the same ClusterQueue, `reclaimWithinCohort` those of ClusterQueues that borrow,
  lowest priority and newest first (https://kueue.sigs.k8s.io/docs/concepts/preemption/). A preempted Job is
  suspended again, its template restored, and its Workload requeued.
- Partial admission: a Job annotated `kueue.x-k8s.io/job-min-parallelism` is admitted with the largest
  parallelism down to that minimum that fits, and `kueue.x-k8s.io/job-completions-equal-parallelism: "true"`
  lowers its completions with it (https://kueue.sigs.k8s.io/docs/tasks/run/jobs/#partial-admission,
  https://kueue.sigs.k8s.io/docs/reference/labels-and-annotations/).
- A finished Job or pod finishes its Workload and its quota is released.
- Kubeflow Trainer TrainJobs (framework `trainer.kubeflow.org/trainjob`, https://kueue.sigs.k8s.io/docs/tasks/run/trainjobs/):
  the webhook suspends a queued TrainJob; its Workload has one pod set per replicated job of its runtime (named after
  it; the `node` job counts the TrainJob's numNodes); admission adds a `podSpecOverrides` entry with the flavors'
  node selector and tolerations for each pod set's job and clears `suspend`; eviction suspends it again and removes
  that entry; Complete / Failed finish the Workload. A TrainJob is admitted whole (no partial admission).
- KServe has no Kueue integration (kubernetes-sigs/kueue#1603): an InferenceService is queued only through its
  predictor pods, which the pod integration manages when `predictor.labels` carries the queue-name label.

- Topology Aware Scheduling (TAS flavors, the pod-set topology annotations, placement and the topology
  ungater): kueue_tas.py, with its sources.

Simplified: admission checks, fair sharing, waitForPodsReady and MultiKueue are not modelled.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction

from tests.backends.k8s_fake import podspec, quantity
from tests.backends.k8s_fake.kueue_quota import FIT, PREEMPT, Tree, assign, message
from tests.backends.k8s_fake.kueue_tas import TOPOLOGY_GATE, Tas, domain_selectors, encode

GROUP = "kueue.x-k8s.io"
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
GATE = "kueue.x-k8s.io/admission"
MANAGED = "kueue.x-k8s.io/managed"
OWNER = "fake.kueue/owner"  # where the model keeps which object (and LWS group) a Workload stands for
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL = "kueue.x-k8s.io/job-completions-equal-parallelism"
TRAINER = "trainer.kubeflow.org"
TRAINJOB = "trainer.kubeflow.org/trainjob"
SAVED_OVERRIDES = "fake.kueue/trainjob-overrides"  # a TrainJob's podSpecOverrides before admission


@dataclass
class KueueConfig:
    """The parts of Kueue's Configuration the model honours (config.kueue.x-k8s.io/v1beta2 `resources`)."""

    exclude_resource_prefixes: tuple[str, ...] = ()
    transformations: tuple[dict, ...] = ()  # {input, strategy: Retain|Replace, outputs: {name: qty}, multiplyBy}
    frameworks: tuple[str, ...] = (
        "batch/job",
        "pod",
        "deployment",
        "leaderworkerset.x-k8s.io/leaderworkerset",
        "trainer.kubeflow.org/trainjob",
    )


def _cond(kind: str, status: str, reason: str, msg: str, now: str) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": msg, "lastTransitionTime": now}


def _true(obj: dict, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


@dataclass
class Candidate:
    workload: dict
    cq: str
    priority: int
    podsets: list[dict] = field(default_factory=list)


class Kueue:
    def __init__(self, plane, config: KueueConfig | None = None):
        self.plane = plane
        self.config = config or KueueConfig()
        self.tas = Tas(plane)

    # --- webhooks ------------------------------------------------------------------------------------------

    def mutate(self, resource, obj: dict) -> None:
        """Kueue's defaulting webhooks on create: a queued Job or TrainJob starts suspended; a Deployment's and a
        LeaderWorkerSet's queue label reaches their pod templates; a queued pod is gated until admitted."""
        labels = obj.get("metadata", {}).get("labels") or {}
        key = (resource.group, resource.kind)
        suspends = {("batch", "Job"): "batch/job", (TRAINER, "TrainJob"): TRAINJOB}
        if key in suspends and QUEUE in labels and suspends[key] in self.config.frameworks:
            obj.setdefault("spec", {})["suspend"] = True  # a queued Job or TrainJob starts suspended
        elif key == ("apps", "Deployment") and QUEUE in labels and "deployment" in self.config.frameworks:
            template = obj["spec"]["template"].setdefault("metadata", {})
            template.setdefault("labels", {})[QUEUE] = labels[QUEUE]
        elif key == ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") and QUEUE in labels:
            lwt = obj["spec"]["leaderWorkerTemplate"]
            for name in ("leaderTemplate", "workerTemplate"):
                if lwt.get(name):
                    lwt[name].setdefault("metadata", {}).setdefault("labels", {})[QUEUE] = labels[QUEUE]
        elif key == ("", "Pod") and QUEUE in labels and "pod" in self.config.frameworks:
            owners = {r.get("kind") for r in obj["metadata"].get("ownerReferences") or []}
            if owners & {"Job"} or obj["metadata"].get("namespace") in ("kube-system", "kueue-system"):
                return  # pods of a Job are the Job integration's; system namespaces are excluded by default
            obj["metadata"]["labels"][MANAGED] = "true"
            gates = obj["spec"].setdefault("schedulingGates", [])
            if not any(g.get("name") == GATE for g in gates):
                gates.append({"name": GATE})

    # --- the controller ------------------------------------------------------------------------------------

    @property
    def workloads(self):
        return self.plane.resource(GROUP, "v1beta2", "workloads")

    def reconcile(self, now: datetime) -> bool:
        changed = self._create_workloads(now)
        changed |= self._finish(now)
        changed |= self._schedule(now)
        changed |= self._ungate_pods(now)
        changed |= self._ungate_topology()
        changed |= self._status(now)
        return changed

    # Workloads for the objects that want one

    def _owners(self) -> list[tuple[dict, str, list[dict], str]]:
        """(owner, group index or "", pod sets, queue name) for each object Kueue manages."""
        out = []
        for job in self.plane.store.all("batch", "jobs"):
            queue = (job["metadata"].get("labels") or {}).get(QUEUE)
            if queue and "batch/job" in self.config.frameworks and not job["metadata"].get("deletionTimestamp"):
                spec = job["spec"]
                count = min(spec.get("parallelism", 1), spec.get("completions") or spec.get("parallelism", 1))
                podset = {"name": "main", "count": count, "template": spec["template"]}
                minimum = (job["metadata"].get("annotations") or {}).get(MIN_PARALLELISM)
                if minimum and minimum.isdigit() and 0 < int(minimum) < count:
                    podset["minCount"] = int(minimum)  # partial admission
                out.append((job, "", [podset], queue))
        if self.plane.trainer is not None and TRAINJOB in self.config.frameworks:
            for trainjob in self.plane.store.all(TRAINER, "trainjobs"):
                queue = (trainjob["metadata"].get("labels") or {}).get(QUEUE)
                podsets = self.plane.trainer.pod_sets(trainjob)
                if queue and podsets and not trainjob["metadata"].get("deletionTimestamp"):
                    out.append((trainjob, "", podsets, queue))
        for pod in self.plane.store.all("", "pods"):
            labels = pod["metadata"].get("labels") or {}
            owners = {r.get("kind") for r in pod["metadata"].get("ownerReferences") or []}
            if labels.get(MANAGED) == "true" and QUEUE in labels and "LeaderWorkerSet" not in owners:
                template = {"metadata": {"labels": labels, "annotations": pod["metadata"].get("annotations") or {}}}
                template["spec"] = pod["spec"]
                out.append((pod, "", [{"name": "main", "count": 1, "template": template}], labels[QUEUE]))
        for lws in self.plane.store.all("leaderworkerset.x-k8s.io", "leaderworkersets"):
            queue = (lws["metadata"].get("labels") or {}).get(QUEUE)
            if not queue or lws["metadata"].get("deletionTimestamp"):
                continue
            lwt = lws["spec"]["leaderWorkerTemplate"]
            size = lwt.get("size", 1)
            if lwt.get("leaderTemplate"):
                podsets = [{"name": "leader", "count": 1, "template": lwt["leaderTemplate"]}]
                if size > 1:
                    podsets.append({"name": "workers", "count": size - 1, "template": lwt["workerTemplate"]})
            else:
                podsets = [{"name": "main", "count": size, "template": lwt["workerTemplate"]}]
            for group in range(lws["spec"].get("replicas", 1)):
                out.append((lws, str(group), podsets, queue))
        return out

    def _workload_of(self, owner: dict, group: str) -> dict | None:
        tag = f"{owner['metadata']['uid']}/{group}"
        for wl in self.plane.store.all(GROUP, "workloads"):
            if (wl["metadata"].get("annotations") or {}).get(OWNER) == tag:
                return wl
        return None

    def _priority(self, owner: dict, podsets: list[dict]) -> tuple[int | None, str]:
        name = (owner["metadata"].get("labels") or {}).get(PRIORITY)
        if name:
            wpc = self.plane.store.bucket(self.plane.resource(GROUP, "v1beta2", "workloadpriorityclasses")).get(
                ("", name)
            )
            return (None, name) if wpc is None else (int(wpc.get("value", 0)), name)
        pc_name = (podsets[0]["template"].get("spec") or {}).get("priorityClassName")
        classes = self.plane.store.all("scheduling.k8s.io", "priorityclasses")
        if pc_name:
            pc = next((c for c in classes if c["metadata"]["name"] == pc_name), None)
            return (None, pc_name) if pc is None else (int(pc.get("value", 0)), pc_name)
        default = next((c for c in classes if c.get("globalDefault")), None)
        return (int(default.get("value", 0)) if default else 0), ""

    def _create_workloads(self, now: datetime) -> bool:
        changed = False
        owners = self._owners()
        wanted = {f"{owner['metadata']['uid']}/{group}" for owner, group, _, _ in owners}
        for wl in self.plane.store.all(GROUP, "workloads"):
            tag = (wl["metadata"].get("annotations") or {}).get(OWNER, "")
            if tag.split("/")[1] and tag not in wanted:  # a LeaderWorkerSet group scaled away
                self.plane.store.remove(self.workloads, wl["metadata"]["namespace"], wl["metadata"]["name"])
                changed = True
        for owner, group, podsets, queue in owners:
            if self._workload_of(owner, group) is not None:
                continue
            priority, class_name = self._priority(owner, podsets)
            if priority is None:
                continue  # Kueue fails to compose the Workload (the class is not found) and retries: none exists
            kind = owner["kind"].lower()
            name = owner["metadata"]["name"] + (f"-{group}" if group else "")
            digest = hashlib.sha256(f"{owner['metadata']['uid']}/{group}".encode()).hexdigest()[:5]
            workload = {
                "metadata": {
                    "name": f"{kind}-{name}-{digest}"[:253],
                    "labels": {"kueue.x-k8s.io/job-uid": owner["metadata"]["uid"]},
                    "annotations": {OWNER: f"{owner['metadata']['uid']}/{group}"},
                    "ownerReferences": [
                        {
                            "apiVersion": owner["apiVersion"],
                            "kind": owner["kind"],
                            "name": owner["metadata"]["name"],
                            "uid": owner["metadata"]["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": {
                    "queueName": queue,
                    "priority": priority,
                    **({"priorityClassName": class_name} if class_name else {}),
                    "podSets": [
                        {
                            "name": p["name"],
                            "count": p["count"],
                            **({"minCount": p["minCount"]} if "minCount" in p else {}),
                            "template": _copy(p["template"]),
                        }
                        for p in podsets
                    ],
                },
                "status": {},
            }
            created = self.plane.store.create(self.workloads, owner["metadata"]["namespace"], workload)
            self.plane.event(
                now,
                owner,
                "CreatedWorkload",
                f"Created Workload: {owner['metadata']['namespace']}/{created['metadata']['name']}",
                "Normal",
            )
            changed = True
        return changed

    # finishing

    def _owner_of(self, wl: dict) -> tuple[dict | None, str]:
        uid, _, group = (wl["metadata"].get("annotations") or {}).get(OWNER, "/").partition("/")
        ref = (wl["metadata"].get("ownerReferences") or [{}])[0]
        plural = {
            "Job": ("batch", "jobs"),
            "Pod": ("", "pods"),
            "LeaderWorkerSet": ("leaderworkerset.x-k8s.io", "leaderworkersets"),
            "TrainJob": (TRAINER, "trainjobs"),
        }
        group_plural = plural.get(ref.get("kind"))
        if group_plural is None:
            return None, group
        for obj in self.plane.store.all(*group_plural):
            if obj["metadata"]["uid"] == uid:
                return obj, group
        return None, group

    def _finish(self, now: datetime) -> bool:
        changed = False
        stamp = self.plane.stamp(now)
        for wl in self.plane.store.all(GROUP, "workloads"):
            if _true(wl, "Finished"):
                continue
            owner, _ = self._owner_of(wl)
            if owner is None:
                continue
            done = ""
            if owner["kind"] in ("Job", "TrainJob"):
                if _true(owner, "Complete"):
                    done = "Succeeded"
                elif _true(owner, "Failed"):
                    done = "Failed"
            elif owner["kind"] == "Pod" and (owner.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                done = owner["status"]["phase"]
            if done:
                text = "Job finished successfully" if done == "Succeeded" else "Job failed"
                wl["status"]["conditions"] = [
                    *[c for c in wl["status"].get("conditions", []) if c["type"] != "Finished"],
                    _cond("Finished", "True", done, text, stamp),
                ]
                self.plane.save(self.workloads, wl)
                changed = True
        return changed

    # scheduling

    def _usage(self, exclude: set[str] = frozenset()) -> tuple[dict[str, dict], list[dict]]:
        usage: dict[str, dict] = {}
        admitted = []
        for wl in self.plane.store.all(GROUP, "workloads"):
            admission = (wl.get("status") or {}).get("admission")
            if not admission or _true(wl, "Finished") or not _true(wl, "QuotaReserved"):
                continue
            admitted.append(wl)
            if wl["metadata"]["uid"] in exclude:
                continue
            into = usage.setdefault(admission["clusterQueue"], {})
            for ps in admission.get("podSetAssignments") or []:
                for res, flavor in (ps.get("flavors") or {}).items():
                    amount = quantity.parse((ps.get("resourceUsage") or {}).get(res, 0))
                    into[(flavor, res)] = into.get((flavor, res), Fraction(0)) + amount
        return usage, admitted

    def _tree(self, exclude: set[str] = frozenset()) -> Tree:
        usage, _ = self._usage(exclude)
        return Tree(self.plane.store.all(GROUP, "clusterqueues"), self.plane.store.all(GROUP, "cohorts"), usage)

    def requests(self, podset: dict) -> dict[str, Fraction]:
        """The pod set's total requests as Kueue counts them: per pod (limits standing in for missing requests),
        minus excluded resource prefixes, transformed, times the pod count."""
        per_pod = podspec.pod_requests(podset["template"].get("spec") or {})
        per_pod = {
            k: v for k, v in per_pod.items() if not any(k.startswith(p) for p in self.config.exclude_resource_prefixes)
        }
        for rule in self.config.transformations:
            if rule["input"] not in per_pod:
                continue
            amount = per_pod[rule["input"]]
            if rule.get("multiplyBy"):
                amount *= per_pod.get(rule["multiplyBy"], Fraction(1))
            if rule.get("strategy", "Retain") == "Replace":
                del per_pod[rule["input"]]
            for out, factor in (rule.get("outputs") or {}).items():
                per_pod[out] = per_pod.get(out, Fraction(0)) + amount * quantity.parse(factor)
        return {k: v * podset["count"] for k, v in per_pod.items() if v}

    def _inadmissible(self, wl: dict, ns_labels: dict) -> tuple[str, str, str | None]:
        """(reason, message, cluster queue) when the Workload cannot even be tried; ("", "", cq) when it can."""
        ns, queue = wl["metadata"]["namespace"], wl["spec"]["queueName"]
        lq = self.plane.store.bucket(self.plane.resource(GROUP, "v1beta2", "localqueues")).get((ns, queue))
        if lq is None:
            return "Inadmissible", f"LocalQueue {queue} doesn't exist", None
        if (lq.get("spec") or {}).get("stopPolicy", "None") != "None":
            return "Inadmissible", f"LocalQueue {queue} is inactive", None
        cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
        cq = self.plane.store.bucket(self.plane.resource(GROUP, "v1beta2", "clusterqueues")).get(("", cq_name))
        if cq is None:
            return "Inadmissible", f"ClusterQueue {cq_name} doesn't exist", None
        inactive = self.missing_flavors(cq) or self.tas.missing_topologies(cq, self._flavors())
        if inactive or (cq.get("spec") or {}).get("stopPolicy", "None") != "None":
            return "Inadmissible", f"ClusterQueue {cq_name} is inactive", None
        selector = (cq.get("spec") or {}).get("namespaceSelector")
        if selector is None or not podspec.selector_matches(selector, ns_labels.get(ns, {})):
            return "Pending", "Workload namespace doesn't match ClusterQueue selector", None
        return "", "", cq_name

    def missing_flavors(self, cq: dict) -> list[str]:
        flavors = self.plane.store.bucket(self.plane.resource(GROUP, "v1beta2", "resourceflavors"))
        names = [f["name"] for g in (cq.get("spec") or {}).get("resourceGroups") or [] for f in g.get("flavors") or []]
        return [n for n in names if ("", n) not in flavors]

    def _flavors(self) -> dict[str, dict]:
        return {f["metadata"]["name"]: f for f in self.plane.store.all(GROUP, "resourceflavors")}

    def _topology_check(self, cq: dict, flavors: dict):
        """Kueue's TAS flavor matching for pod sets of this ClusterQueue (kueue_tas.py)."""
        tas_only = self.tas.tas_only(cq, flavors)
        return lambda podset, flavor: self.tas.flavor_problem(podset, flavor, tas_only)

    def _placements(self, cand: Candidate, results, flavors: dict, cq: dict) -> tuple[dict, str]:
        """TAS placement of each pod set that quota admits on a TAS flavor: {pod set: Placement}, or the reason
        in Kueue's words why one does not fit."""
        _, admitted = self._usage()
        tas_only = self.tas.tas_only(cq, flavors)
        podsets = {p["name"]: p for p in cand.podsets}
        out: dict = {}
        extra: dict[str, dict] = {}
        for r in results:
            podset = dict(podsets[r.name], count=r.count)
            for flavor_name in sorted(set(r.flavors.values())):
                flavor = flavors.get(flavor_name) or {}
                placement, why = self.tas.place(podset, flavor, tas_only, admitted, extra)
                if why:
                    return {}, f"couldn't assign flavors to pod set {r.name}: {why}"
                if placement is not None:
                    out[r.name] = placement
                    per_pod = podspec.pod_requests(podset["template"].get("spec") or {})
                    for node, pods in placement.nodes.items():
                        podspec.add(extra.setdefault(node, {}), per_pod, times=pods)
                    break
        return out, ""

    def _candidates(self, ns_labels: dict, stamp: str, now: datetime) -> tuple[list[Candidate], bool]:
        changed = False
        pending = []
        for wl in self.plane.store.all(GROUP, "workloads"):
            if _true(wl, "Finished") or _true(wl, "QuotaReserved"):
                continue
            reason, text, cq = self._inadmissible(wl, ns_labels)
            if cq is None:
                changed |= self._set_pending(wl, reason, text, stamp, now)
                continue
            podsets = [dict(p, requests=self.requests(p)) for p in wl["spec"]["podSets"]]
            pending.append(Candidate(wl, cq, int(wl["spec"].get("priority", 0)), podsets))
        return pending, changed

    def _set_pending(self, wl: dict, reason: str, text: str, stamp: str, now: datetime) -> bool:
        conditions = wl["status"].get("conditions") or []
        old = next((c for c in conditions if c["type"] == "QuotaReserved"), None)
        if old and old.get("reason") == reason and old.get("message") == text and old["status"] == "False":
            return False
        wl["status"]["conditions"] = [c for c in conditions if c["type"] != "QuotaReserved"] + [
            _cond("QuotaReserved", "False", reason, text, stamp)
        ]
        self.plane.save(self.workloads, wl)
        if reason == "Pending":
            self.plane.event(now, wl, "Pending", text, "Normal")
        return True

    def _schedule(self, now: datetime) -> bool:
        stamp = self.plane.stamp(now)
        ns_labels = {
            n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in self.plane.store.all("", "namespaces")
        }
        pending, changed = self._candidates(ns_labels, stamp, now)
        cqs = {c["metadata"]["name"]: c for c in self.plane.store.all(GROUP, "clusterqueues")}
        flavors = self._flavors()
        order = sorted(
            pending,
            key=lambda c: (
                c.cq,
                -c.priority,
                c.workload["metadata"]["creationTimestamp"],
                c.workload["metadata"]["name"],
            ),
        )
        blocked: set[str] = set()
        while True:
            tree = self._tree()
            fits = []
            for cand in order:
                if cand.cq in blocked or _true(cand.workload, "QuotaReserved"):
                    continue
                results = assign(
                    tree,
                    cand.cq,
                    flavors,
                    cand.podsets,
                    self._preempt_while_borrowing(cqs[cand.cq]),
                    self._topology_check(cqs[cand.cq], flavors),
                )
                mode = min((r.mode for r in results), default=FIT)
                if mode != FIT:
                    partial = self._partial(tree, cand, flavors, cqs)
                    if partial is not None:
                        results, mode = partial, FIT
                placements: dict = {}
                if mode == FIT and len(results) == len(cand.podsets):
                    placements, why = self._placements(cand, results, flavors, cqs[cand.cq])
                    if why:
                        # Quota fits but the topology does not: the workload waits (TAS placement comes after
                        # quota; https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/).
                        changed |= self._set_pending(cand.workload, "Pending", why, stamp, now)
                        if cqs[cand.cq].get("spec", {}).get("queueingStrategy") == "StrictFIFO":
                            blocked.add(cand.cq)
                        continue
                if mode == FIT and len(results) == len(cand.podsets):
                    key = ("cq", cand.cq)
                    borrows = any(
                        tree.usage.get(key, {}).get((flavor, res), 0) + r.usage[res]
                        > tree.subtree(key).get((flavor, res), 0)
                        for r in results
                        for res, flavor in r.flavors.items()
                    )
                    fits.append(
                        (
                            borrows,
                            -cand.priority,
                            cand.workload["metadata"]["creationTimestamp"],
                            cand,
                            (results, placements),
                        )
                    )
                    continue
                changed |= self._set_pending(cand.workload, "Pending", message(results), stamp, now)
                if mode == PREEMPT and self._preempt(cand, results, flavors, cqs, stamp, now):
                    changed = True
                    blocked.add(cand.cq)
                if cqs[cand.cq].get("spec", {}).get("queueingStrategy") == "StrictFIFO":
                    blocked.add(cand.cq)
            if not fits:
                return changed
            fits.sort(key=lambda f: (f[0], f[1], f[2]))
            _, _, _, cand, (results, placements) = fits[0]
            self._admit(cand, results, placements, flavors, stamp, now)
            changed = True

    def _partial(self, tree: Tree, cand: Candidate, flavors: dict, cqs: dict):
        """Partial admission (https://kueue.sigs.k8s.io/docs/tasks/run/jobs/#partial-admission): a pod set with a
        minCount is admitted with the largest count from count-1 down to minCount that fits."""
        if not any("minCount" in p for p in cand.podsets):
            return None
        for step in range(1, max(p["count"] - p.get("minCount", p["count"]) for p in cand.podsets) + 1):
            scaled = []
            for p in cand.podsets:
                count = max(p.get("minCount", p["count"]), p["count"] - step)
                scaled.append(
                    dict(p, count=count, requests={k: v * count / p["count"] for k, v in p["requests"].items()})
                )
            results = assign(
                tree,
                cand.cq,
                flavors,
                scaled,
                self._preempt_while_borrowing(cqs[cand.cq]),
                self._topology_check(cqs[cand.cq], flavors),
            )
            if min((r.mode for r in results), default=FIT) == FIT and len(results) == len(scaled):
                return results
        return None

    def _preempt_while_borrowing(self, cq: dict) -> bool:
        preemption = (cq.get("spec") or {}).get("preemption") or {}
        return ((preemption.get("borrowWithinCohort") or {}).get("policy", "Never")) != "Never"

    def _admit(self, cand: Candidate, results, placements: dict, flavors: dict, stamp: str, now: datetime) -> None:
        wl = cand.workload
        assignments = []
        for r in results:
            assignment = {
                "name": r.name,
                "flavors": r.flavors,
                "resourceUsage": {res: quantity.text(res, amount) for res, amount in sorted(r.usage.items())},
                "count": r.count,
            }
            if r.name in placements:
                assignment["topologyAssignment"] = encode(placements[r.name])
            assignments.append(assignment)
        wl["status"]["admission"] = {"clusterQueue": cand.cq, "podSetAssignments": assignments}
        conditions = [
            c for c in wl["status"].get("conditions") or [] if c["type"] not in ("QuotaReserved", "Admitted", "Evicted")
        ]
        wl["status"]["conditions"] = [
            *conditions,
            _cond("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cand.cq}", stamp),
            _cond("Admitted", "True", "Admitted", "The workload is admitted", stamp),
        ]
        self.plane.save(self.workloads, wl)
        self.plane.event(now, wl, "QuotaReserved", f"Quota reserved in ClusterQueue {cand.cq}", "Normal")
        self.plane.event(now, wl, "Admitted", f"Admitted by ClusterQueue {cand.cq}", "Normal")
        owner, _ = self._owner_of(wl)
        if owner is None:
            return
        if owner["kind"] == "Job":
            spec = owner["spec"]["template"].setdefault("spec", {})
            _inject(spec, *self._injection(assignments[0], flavors))
            if assignments[0].get("topologyAssignment"):
                # The pods start gated; the topology ungater gives each its domain (KEP-2724, TopologySchedulingGate).
                gates = spec.setdefault("schedulingGates", [])
                if {"name": TOPOLOGY_GATE} not in gates:
                    gates.append({"name": TOPOLOGY_GATE})
            count = assignments[0]["count"]
            if count != owner["spec"].get("parallelism", 1):
                owner["spec"]["parallelism"] = count
                if (owner["metadata"].get("annotations") or {}).get(COMPLETIONS_EQUAL) == "true":
                    owner["spec"]["completions"] = count
            owner["spec"]["suspend"] = False
            self.plane.save(self.plane.resource("batch", "v1", "jobs"), owner)
        elif owner["kind"] == "TrainJob":
            # Kueue keeps what the TrainJob asked for, to restore it on eviction (the model: as an annotation).
            overrides = owner["spec"].get("podSpecOverrides") or []
            wl["metadata"].setdefault("annotations", {})[SAVED_OVERRIDES] = json.dumps(overrides)
            self.plane.save(self.workloads, wl)
            overrides = _copy(overrides)
            for assignment in assignments:
                selector, tolerations = self._injection(assignment, flavors)
                override = {"targetJobs": [{"name": assignment["name"]}]}
                if selector:
                    override["nodeSelector"] = selector
                if tolerations:
                    override["tolerations"] = tolerations
                overrides.append(override)
            owner["spec"]["podSpecOverrides"] = overrides
            owner["spec"]["suspend"] = False
            self.plane.save(self.plane.resource(TRAINER, "v1alpha1", "trainjobs"), owner)
        # a Deployment's pod and a LeaderWorkerSet group's pods are ungated by _ungate_pods
        self.plane.event(now, owner, "Started", f"Admitted by clusterQueue {cand.cq}", "Normal")

    def _injection(self, assignment: dict, flavors: dict) -> tuple[dict, list]:
        """The node selector and tolerations an admitted pod set gets: its flavors' nodeLabels and tolerations."""
        selector, tolerations = {}, []
        for flavor_name in sorted(set((assignment.get("flavors") or {}).values())):
            fspec = (flavors.get(flavor_name) or {}).get("spec") or {}
            selector.update(fspec.get("nodeLabels") or {})
            tolerations.extend(fspec.get("tolerations") or [])
        return selector, tolerations

    def _ungate_pods(self, now: datetime) -> bool:
        """Kueue ungates the pods of an admitted pod Workload or LeaderWorkerSet group as they appear (a group's
        pods may be recreated), adding the flavors' node selector and tolerations."""
        changed = False
        flavors = self._flavors()
        for wl in self.plane.store.all(GROUP, "workloads"):
            admission = (wl.get("status") or {}).get("admission")
            if not admission or _true(wl, "Finished"):
                continue
            owner, group = self._owner_of(wl)
            if owner is None:
                continue
            if owner["kind"] in ("Job", "TrainJob"):
                if owner["spec"].get("suspend") and not owner["metadata"].get("deletionTimestamp"):
                    # Suspended again from outside while admitted (e.g. a re-applied manifest): Kueue's job
                    # reconciler starts an admitted Workload's Job again.
                    owner["spec"]["suspend"] = False
                    self.plane.save(self.plane.resource(*_api(owner)), owner)
                    changed = True
                continue
            assignments = {a["name"]: a for a in admission["podSetAssignments"]}
            pods = [owner] if owner["kind"] == "Pod" else self.plane.pods_of(owner)
            for pod in pods:
                labels = pod["metadata"].get("labels") or {}
                gated = any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or [])
                if not gated or (owner["kind"] != "Pod" and labels.get(LWS_GROUP) != group):
                    continue
                if owner["kind"] == "Pod" or "main" in assignments:
                    role = "main"
                elif labels.get("leaderworkerset.sigs.k8s.io/worker-index") == "0":
                    role = "leader"
                else:
                    role = "workers"
                spec = pod["spec"]
                _inject(spec, *self._injection(assignments[role], flavors))
                topology = assignments[role].get("topologyAssignment")
                if topology:
                    siblings = (
                        pods
                        if owner["kind"] == "Pod"
                        else [p for p in pods if (p["metadata"].get("labels") or {}).get(LWS_GROUP) == group]
                    )
                    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **_next_domain(topology, siblings)}
                spec["schedulingGates"] = [g for g in spec["schedulingGates"] if g.get("name") != GATE]
                if not spec["schedulingGates"]:
                    del spec["schedulingGates"]
                self.plane.save(self.plane.pods, pod)
                changed = True
        return changed

    def _ungate_topology(self) -> bool:
        """Kueue's topology ungater: a TAS Job's pods start with the `kueue.x-k8s.io/topology` gate; each gets the
        node selector of a domain of the assignment that still has room for a pod, in the pods' order, and loses
        the gate (KEP-2724, "Enforcing the assignment")."""
        changed = False
        for wl in self.plane.store.all(GROUP, "workloads"):
            admission = (wl.get("status") or {}).get("admission")
            if not admission or _true(wl, "Finished"):
                continue
            topology = (admission["podSetAssignments"][0] if admission["podSetAssignments"] else {}).get(
                "topologyAssignment"
            )
            owner, _ = self._owner_of(wl)
            if not topology or owner is None or owner["kind"] != "Job":
                continue
            pods = sorted(self.plane.pods_of(owner), key=lambda p: p["metadata"]["name"])
            for pod in pods:
                gates = pod["spec"].get("schedulingGates") or []
                if {"name": TOPOLOGY_GATE} not in gates:
                    continue
                spec = pod["spec"]
                spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **_next_domain(topology, pods)}
                spec["schedulingGates"] = [g for g in gates if g.get("name") != TOPOLOGY_GATE]
                if not spec["schedulingGates"]:
                    del spec["schedulingGates"]
                self.plane.save(self.plane.pods, pod)
                changed = True
        return changed

    # preemption

    def _preempt(self, cand: Candidate, results, flavors, cqs, stamp: str, now: datetime) -> bool:
        spec = (cqs[cand.cq].get("spec") or {}).get("preemption") or {}
        within = spec.get("withinClusterQueue", "Never")
        reclaim = spec.get("reclaimWithinCohort", "Never")
        _, admitted = self._usage()
        tree = self._tree()
        mine = cand.workload["metadata"]["creationTimestamp"]
        victims = []
        for wl in admitted:
            cq = wl["status"]["admission"]["clusterQueue"]
            prio = int(wl["spec"].get("priority", 0))
            if cq == cand.cq:
                if (within == "LowerPriority" and prio < cand.priority) or (
                    within == "LowerOrNewerEqualPriority"
                    and (prio < cand.priority or (prio == cand.priority and wl["metadata"]["creationTimestamp"] > mine))
                ):
                    victims.append((0, prio, wl))
            elif (
                reclaim != "Never"
                and self._same_tree(tree, cq, cand.cq)
                and tree.borrowing(cq)
                and (reclaim == "Any" or prio < cand.priority)
            ):
                victims.append((-1, prio, wl))
        # Borrowing ClusterQueues' workloads first, then the lowest priority, then the most recently admitted.
        victims.sort(key=lambda v: _admitted_at(v[2]), reverse=True)
        victims.sort(key=lambda v: (v[0], v[1]))
        removed: list[dict] = []
        for _, _, wl in victims:
            removed.append(wl)
            trial = self._tree({w["metadata"]["uid"] for w in removed})
            attempt = assign(trial, cand.cq, flavors, cand.podsets, False, self._topology_check(cqs[cand.cq], flavors))
            if min((r.mode for r in attempt), default=FIT) == FIT and len(attempt) == len(cand.podsets):
                for victim in removed:
                    same = victim["status"]["admission"]["clusterQueue"] == cand.cq
                    why = "prioritization in the ClusterQueue" if same else "reclamation within the cohort"
                    owner, _ = self._owner_of(cand.workload)
                    self.evict(
                        victim,
                        "Preempted",
                        f"Preempted to accommodate a workload (UID: {cand.workload['metadata']['uid']}, "
                        f"JobUID: {(owner or {}).get('metadata', {}).get('uid', 'UNKNOWN')}) due to {why}",
                        stamp,
                        now,
                    )
                return True
        return False

    def _same_tree(self, tree: Tree, a: str, b: str) -> bool:
        def root(key):
            while tree.nodes[key].parent:
                key = tree.nodes[key].parent
            return key

        return root(("cq", a)) == root(("cq", b)) and tree.nodes[("cq", a)].parent is not None

    def evict(self, wl: dict, reason: str, text: str, stamp: str, now: datetime) -> None:
        """Evict an admitted Workload: its quota is released, its Job suspended with the template Kueue saved
        in the Workload, its pods deleted; the Workload queues again."""
        wl["status"].pop("admission", None)
        conditions = [
            c for c in wl["status"].get("conditions") or [] if c["type"] not in ("QuotaReserved", "Admitted", "Evicted")
        ]
        wl["status"]["conditions"] = [
            *conditions,
            _cond("Evicted", "True", reason, text, stamp),
            _cond("QuotaReserved", "False", reason, text, stamp),
            _cond("Admitted", "False", reason, text, stamp),
        ]
        self.plane.save(self.workloads, wl)
        self.plane.event(now, wl, reason, text, "Normal")
        owner, group = self._owner_of(wl)
        if owner is None:
            return
        if owner["kind"] == "Job":
            original = wl["spec"]["podSets"][0]["template"].get("spec") or {}
            spec = owner["spec"]["template"]["spec"]
            for key in ("nodeSelector", "tolerations", "schedulingGates"):
                if key in original:
                    spec[key] = _copy(original[key])
                else:
                    spec.pop(key, None)
            owner["spec"]["suspend"] = True
            count = wl["spec"]["podSets"][0]["count"]
            if "minCount" in wl["spec"]["podSets"][0]:
                owner["spec"]["parallelism"] = count
                if (owner["metadata"].get("annotations") or {}).get(COMPLETIONS_EQUAL) == "true":
                    owner["spec"]["completions"] = count
            self.plane.save(self.plane.resource("batch", "v1", "jobs"), owner)
            self.plane.event(now, owner, "Stopped", text, "Normal")
        elif owner["kind"] == "TrainJob":
            overrides = json.loads((wl["metadata"].get("annotations") or {}).get(SAVED_OVERRIDES, "[]"))
            owner["spec"]["podSpecOverrides"] = overrides
            if not overrides:
                del owner["spec"]["podSpecOverrides"]
            owner["spec"]["suspend"] = True
            self.plane.save(self.plane.resource(TRAINER, "v1alpha1", "trainjobs"), owner)
            self.plane.event(now, owner, "Stopped", text, "Normal")
        elif owner["kind"] == "Pod":
            self.plane.delete(self.plane.pods, owner, now)
        else:
            for pod in self.plane.pods_of(owner):
                if (pod["metadata"].get("labels") or {}).get(LWS_GROUP) == group:
                    self.plane.delete(self.plane.pods, pod, now)

    # status of the queues

    def _status(self, now: datetime) -> bool:
        stamp = self.plane.stamp(now)
        usage, _ = self._usage()
        pending: dict[tuple[str, str], int] = {}
        reserving: dict[tuple[str, str], int] = {}
        for wl in self.plane.store.all(GROUP, "workloads"):
            if _true(wl, "Finished"):
                continue
            key = (wl["metadata"]["namespace"], wl["spec"]["queueName"])
            if _true(wl, "QuotaReserved"):
                reserving[key] = reserving.get(key, 0) + 1
            else:
                pending[key] = pending.get(key, 0) + 1
        changed = False
        cq_res = self.plane.resource(GROUP, "v1beta2", "clusterqueues")
        lq_res = self.plane.resource(GROUP, "v1beta2", "localqueues")
        cq_pending: dict[str, int] = {}
        cq_reserving: dict[str, int] = {}
        for lq in self.plane.store.all(GROUP, "localqueues"):
            key = (lq["metadata"]["namespace"], lq["metadata"]["name"])
            cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
            cq = self.plane.store.bucket(cq_res).get(("", cq_name))
            cq_pending[cq_name] = cq_pending.get(cq_name, 0) + pending.get(key, 0)
            cq_reserving[cq_name] = cq_reserving.get(cq_name, 0) + reserving.get(key, 0)
            if cq is None:
                active = _cond(
                    "Active", "False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue", stamp
                )
            else:
                active = _cond("Active", "True", "Ready", "Can submit new workloads to localQueue", stamp)
            status = {
                "conditions": [active],
                "pendingWorkloads": pending.get(key, 0),
                "reservingWorkloads": reserving.get(key, 0),
                "admittedWorkloads": reserving.get(key, 0),
            }
            changed |= self._put_status(lq_res, lq, status)
        for cq in self.plane.store.all(GROUP, "clusterqueues"):
            name = cq["metadata"]["name"]
            missing = self.missing_flavors(cq)
            no_topology = self.tas.missing_topologies(cq, self._flavors())
            if missing:
                active = _cond(
                    "Active",
                    "False",
                    "FlavorNotFound",
                    f"Can't admit new workloads: references missing ResourceFlavor(s): {', '.join(missing)}.",
                    stamp,
                )
            elif no_topology:
                topology, flavor = no_topology[0]
                text = f'Can\'t admit new workloads: there is no Topology "{topology}" for TAS flavor "{flavor}".'
                active = _cond("Active", "False", "TopologyNotFound", text, stamp)
            elif (cq.get("spec") or {}).get("stopPolicy", "None") != "None":
                active = _cond("Active", "False", "Stopped", "Can't admit new workloads: is stopped.", stamp)
            else:
                active = _cond("Active", "True", "Ready", "Can admit new workloads", stamp)
            by_flavor: dict[str, list] = {}
            for (flavor, res), amount in sorted(usage.get(name, {}).items()):
                by_flavor.setdefault(flavor, []).append({"name": res, "total": quantity.text(res, amount)})
            flavors_usage = [{"name": f, "resources": r} for f, r in by_flavor.items()]
            status = {
                "conditions": [active],
                "pendingWorkloads": cq_pending.get(name, 0),
                "reservingWorkloads": cq_reserving.get(name, 0),
                "admittedWorkloads": cq_reserving.get(name, 0),
                "flavorsReservation": flavors_usage,
                "flavorsUsage": flavors_usage,
            }
            changed |= self._put_status(cq_res, cq, status)
        return changed

    def _put_status(self, resource, obj: dict, status: dict) -> bool:
        old = obj.get("status") or {}
        comparable = {k: v for k, v in status.items() if k != "conditions"}
        old_comparable = {k: old.get(k) for k in comparable}
        same_conditions = [(c["type"], c["status"], c.get("reason")) for c in old.get("conditions") or []] == [
            (c["type"], c["status"], c.get("reason")) for c in status["conditions"]
        ]
        if comparable == old_comparable and same_conditions:
            return False
        obj["status"] = status
        self.plane.save(resource, obj)
        return False  # status only: nothing else reacts to it


def _next_domain(topology: dict, pods: list[dict]) -> dict[str, str]:
    """The node selector of the first domain of a TAS assignment with fewer of `pods` than its count (pods that
    still hold their gate, or have been given another domain, do not count)."""
    for selector, count in domain_selectors(topology):
        placed = sum(
            1
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and all((p["spec"].get("nodeSelector") or {}).get(k) == v for k, v in selector.items())
        )
        if placed < count:
            return selector
    return {}


def _inject(spec: dict, selector: dict, tolerations: list) -> None:
    """Add labels the pod does not select already, and tolerations it does not have."""
    spec["nodeSelector"] = {**selector, **(spec.get("nodeSelector") or {})}
    have = spec.get("tolerations") or []
    spec["tolerations"] = [*have, *[t for t in tolerations if t not in have]]
    if not spec["tolerations"]:
        del spec["tolerations"]
    if not spec["nodeSelector"]:
        del spec["nodeSelector"]


def _api(owner: dict) -> tuple[str, str, str]:
    return (TRAINER, "v1alpha1", "trainjobs") if owner["kind"] == "TrainJob" else ("batch", "v1", "jobs")


def _admitted_at(wl: dict) -> str:
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c["type"] == "QuotaReserved":
            return c.get("lastTransitionTime", "")
    return ""


def _copy(obj):
    return copy.deepcopy(obj)
