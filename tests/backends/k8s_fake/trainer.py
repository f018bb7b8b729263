"""Kubeflow Trainer v2: a TrainJob runs its ClusterTrainingRuntime's JobSet template with the TrainJob's overrides.

Written from the Trainer documentation and the pinned CRD (trainer.kubeflow.org v1alpha1, apps/backends/render/crds):

- Validating webhook `validator.trainjob.trainer.kubeflow.org`: a TrainJob whose `runtimeRef` names a
  ClusterTrainingRuntime that does not exist is refused ("specified clusterTrainingRuntime must be created before
  the TrainJob is created": ClusterTrainingRuntime.ValidateObjects in pkg/runtime/core/clustertrainingruntime.go);
  `spec.managedBy`, when set, must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue (CRD CEL).
- Runtime template (https://www.kubeflow.org/docs/components/trainer/operator-guides/job-template/,
  .../operator-guides/runtime/): the runtime's `template.spec.replicatedJobs`; the job named `node` runs the
  trainer. The TrainJob's `trainer` overrides that job's container `node`: image, command, args, env (merged), and
  `resourcesPerNode`; `numNodes` (default: the runtime's `mlPolicy.numNodes`, else 1) is the node job's
  parallelism and completions. The torch plugin (https://www.kubeflow.org/docs/components/trainer/operator-guides/ml-policy/)
  sets torchrun's PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT.
- `podSpecOverrides` (nodeSelector, tolerations, volumes, containers' volumeMounts/env) apply to the pods of the
  jobs they target (https://www.kubeflow.org/docs/components/trainer/operator-guides/podtemplate-overrides/).
- `suspend` suspends the JobSet (and so its Jobs); Kueue's TrainJob integration sets it at creation and clears it on
  admission (https://kueue.sigs.k8s.io/docs/tasks/run/trainjobs/).
- Status: conditions Suspended, Created, then Complete or Failed when the JobSet completes or fails (one failed Job
  fails the JobSet under the default failure policy: https://jobset.sigs.k8s.io/docs/concepts/).

Simplified: the model creates the JobSet's Jobs directly (`<trainjob>-<replicatedJob>-0`, owned by the TrainJob, with
the JobSet labels `jobset.sigs.k8s.io/jobset-name` / `replicatedjob-name` on their pods, as JobSet sets them); the
batch/v1 Job controller (workloads.py) runs them. No JobSet object, no initializer/exporter jobs, no elastic policy,
no coscheduling PodGroup, no namespaced TrainingRuntime.
"""

from __future__ import annotations

import copy
from datetime import datetime

from tests.backends.k8s_fake.store import ApiError, timestamp
from tests.backends.k8s_fake.workloads import finished

GROUP = "trainer.kubeflow.org"
TRAINER_JOB = "node"  # the replicated job and container the TrainJob's trainer overrides
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
MASTER_PORT = 29400
MANAGED_BY = ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")


def _invalid(message: str) -> ApiError:
    return ApiError(
        422, "Invalid", f'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: {message}'
    )


def _condition(kind: str, status: str, reason: str, message: str, now: datetime) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": timestamp(now)}


class Trainer:
    def __init__(self, plane):
        self.plane = plane

    @property
    def trainjobs(self):
        return self.plane.resource(GROUP, "v1alpha1", "trainjobs")

    def runtime(self, trainjob: dict) -> dict | None:
        ref = trainjob["spec"].get("runtimeRef") or {}
        if ref.get("kind", "ClusterTrainingRuntime") != "ClusterTrainingRuntime":
            return None
        bucket = self.plane.store.bucket(self.plane.resource(GROUP, "v1alpha1", "clustertrainingruntimes"))
        return bucket.get(("", ref.get("name", "")))

    # --- the webhook ------------------------------------------------------------------------------------------

    def admit(self, resource, obj: dict) -> None:
        if (resource.group, resource.kind) != (GROUP, "TrainJob"):
            return
        spec = obj.get("spec") or {}
        managed = spec.get("managedBy")
        if managed is not None and managed not in MANAGED_BY:
            raise ApiError(
                422,
                "Invalid",
                "spec.managedBy: Invalid value: ManagedBy must be trainer.kubeflow.org/trainjob-controller or "
                "kueue.x-k8s.io/multikueue if set",
            )
        ref = spec.get("runtimeRef") or {}
        if self.runtime(obj) is None:
            name = ref.get("name", "")
            raise _invalid(
                f'spec.RuntimeRef: Invalid value: ClusterTrainingRuntime.trainer.kubeflow.org "{name}" not found: '
                "specified clusterTrainingRuntime must be created before the TrainJob is created"
            )

    # --- what the runtime and the overrides make ----------------------------------------------------------------

    def num_nodes(self, trainjob: dict, runtime: dict) -> int:
        trainer = trainjob["spec"].get("trainer") or {}
        return int(trainer.get("numNodes") or (runtime["spec"].get("mlPolicy") or {}).get("numNodes") or 1)

    def pod_template(self, trainjob: dict, runtime: dict, job_name: str) -> dict:
        """Replicated job `job_name`'s pod template: the runtime's, with the TrainJob's trainer and pod overrides."""
        rjob = next(r for r in runtime["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] == job_name)
        template = copy.deepcopy(rjob["template"]["spec"]["template"])
        spec = template.setdefault("spec", {})
        name = trainjob["metadata"]["name"]
        if job_name == TRAINER_JOB:
            trainer = trainjob["spec"].get("trainer") or {}
            nodes = self.num_nodes(trainjob, runtime)
            torch = (runtime["spec"].get("mlPolicy") or {}).get("torch")
            for container in spec.get("containers") or []:
                if container["name"] != TRAINER_JOB:
                    continue
                for key in ("image", "command", "args"):
                    if trainer.get(key):
                        container[key] = copy.deepcopy(trainer[key])
                if trainer.get("resourcesPerNode"):
                    container["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
                env = {e["name"]: e for e in container.get("env") or []}
                for item in trainer.get("env") or []:
                    env[item["name"]] = copy.deepcopy(item)
                if torch is not None:
                    nproc = trainer.get("numProcPerNode") or torch.get("numProcPerNode") or "auto"
                    rank = {
                        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
                    }
                    env.update(
                        {
                            "PET_NNODES": {"name": "PET_NNODES", "value": str(nodes)},
                            "PET_NPROC_PER_NODE": {"name": "PET_NPROC_PER_NODE", "value": str(nproc)},
                            "PET_NODE_RANK": {"name": "PET_NODE_RANK", "valueFrom": rank},
                            "PET_MASTER_ADDR": {"name": "PET_MASTER_ADDR", "value": f"{name}-{TRAINER_JOB}-0-0.{name}"},
                            "PET_MASTER_PORT": {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
                        }
                    )
                container["env"] = list(env.values())
        for override in trainjob["spec"].get("podSpecOverrides") or []:
            if job_name not in {t.get("name") for t in override.get("targetJobs") or []}:
                continue
            if override.get("nodeSelector"):
                spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **override["nodeSelector"]}
            for toleration in override.get("tolerations") or []:
                if toleration not in spec.setdefault("tolerations", []):
                    spec["tolerations"].append(copy.deepcopy(toleration))
            if override.get("volumes"):
                spec["volumes"] = [*(spec.get("volumes") or []), *copy.deepcopy(override["volumes"])]
            if override.get("serviceAccountName"):
                spec["serviceAccountName"] = override["serviceAccountName"]
            for patch in override.get("containers") or []:
                for container in spec.get("containers") or []:
                    if container["name"] == patch.get("name"):
                        container["volumeMounts"] = [
                            *(container.get("volumeMounts") or []),
                            *copy.deepcopy(patch.get("volumeMounts") or []),
                        ]
                        container["env"] = [*(container.get("env") or []), *copy.deepcopy(patch.get("env") or [])]
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels.update({JOBSET_NAME: name, REPLICATED_JOB: job_name})
        spec.setdefault("subdomain", name)  # JobSet's headless Service: pods resolve as <pod hostname>.<jobset>
        return template

    def pod_sets(self, trainjob: dict) -> list[dict]:
        """What Kueue's TrainJob integration queues: one pod set per replicated job, named after it."""
        runtime = self.runtime(trainjob)
        if runtime is None:
            return []
        out = []
        for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
            job_spec = rjob["template"].get("spec") or {}
            trainer_job = rjob["name"] == TRAINER_JOB
            count = self.num_nodes(trainjob, runtime) if trainer_job else job_spec.get("parallelism", 1)
            count *= rjob.get("replicas", 1)
            out.append(
                {"name": rjob["name"], "count": count, "template": self.pod_template(trainjob, runtime, rjob["name"])}
            )
        return out

    # --- the controller ------------------------------------------------------------------------------------------

    def reconcile(self, now: datetime) -> bool:
        changed = False
        jobs = self.plane.resource("batch", "v1", "jobs")
        for trainjob in self.plane.store.all(GROUP, "trainjobs"):
            if trainjob["metadata"].get("deletionTimestamp"):
                continue
            status = trainjob.setdefault("status", {})
            if finished(status):
                continue
            runtime = self.runtime(trainjob)
            if runtime is None:
                continue  # the reconciler fails to build the JobSet and retries: nothing is created
            suspended = bool(trainjob["spec"].get("suspend"))
            name, ns = trainjob["metadata"]["name"], trainjob["metadata"]["namespace"]
            children = []
            for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
                job_name = f"{name}-{rjob['name']}-0"
                job = self.plane.store.bucket(jobs).get((ns, job_name))
                template = self.pod_template(trainjob, runtime, rjob["name"])
                count = self.num_nodes(trainjob, runtime) if rjob["name"] == TRAINER_JOB else None
                if job is None:
                    base = copy.deepcopy(rjob["template"].get("spec") or {})
                    base.update(template=template, suspend=suspended)
                    if count is not None:
                        base.update(parallelism=count, completions=count, completionMode="Indexed")
                    job = self.plane.store.create(
                        jobs,
                        ns,
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "metadata": {
                                "name": job_name,
                                "labels": {
                                    **(trainjob["spec"].get("labels") or {}),
                                    JOBSET_NAME: name,
                                    REPLICATED_JOB: rjob["name"],
                                },
                                "annotations": dict(trainjob["spec"].get("annotations") or {}),
                                "ownerReferences": [self.plane.owner_ref(trainjob)],
                            },
                            "spec": base,
                        },
                    )
                    changed = True
                elif bool(job["spec"].get("suspend")) != suspended:
                    if job["spec"].get("suspend"):  # a suspended Job's template may change: Kueue's node selector
                        job["spec"]["template"] = template
                    job["spec"]["suspend"] = suspended
                    self.plane.save(jobs, job)
                    changed = True
                children.append(job)
            conditions = [c for c in status.get("conditions") or [] if c["type"] not in ("Suspended", "Created")]
            conditions.append(_condition("Created", "True", "JobSetCreated", "succeeded to create JobSet", now))
            if suspended:
                conditions.append(_condition("Suspended", "True", "Suspended", "TrainJob is suspended", now))
            else:
                conditions.append(_condition("Suspended", "False", "Resumed", "TrainJob is resumed", now))
            failed = next((j for j in children if _true(j, "Failed")), None)
            if failed is not None:
                cond = next(c for c in failed["status"]["conditions"] if c["type"] == "Failed")
                message = f"jobset failed: job {failed['metadata']['name']} {cond.get('reason', 'Failed')}"
                conditions.append(_condition("Failed", "True", "JobSetFailed", message, now))
            elif children and all(_true(j, "Complete") for j in children):
                conditions.append(_condition("Complete", "True", "JobSetCompleted", "jobset completed", now))
            if [(c["type"], c["status"]) for c in conditions] != [
                (c["type"], c["status"]) for c in status.get("conditions") or []
            ]:
                status["conditions"] = conditions
                self.plane.save(self.trainjobs, trainjob)
                changed = True
        return changed


def _true(obj: dict, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])
