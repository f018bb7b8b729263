"""The API resources the fake serves: built-ins the backend uses, plus add-on CRDs when installed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    addon: str = ""  # "" for built-ins; else served only when the add-on is installed
    subresources: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


RESOURCES = (
    Resource("", "v1", "nodes", "Node", False, subresources=("status",)),
    Resource("", "v1", "pods", "Pod", True, subresources=("status", "eviction", "log")),
    Resource("", "v1", "namespaces", "Namespace", False, subresources=("status",)),
    Resource("", "v1", "resourcequotas", "ResourceQuota", True, subresources=("status",)),
    Resource("", "v1", "services", "Service", True, subresources=("status",)),
    Resource("", "v1", "events", "Event", True),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True),
    Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
    Resource("batch", "v1", "jobs", "Job", True, subresources=("status",)),
    Resource("apps", "v1", "deployments", "Deployment", True, subresources=("status",)),
    Resource("apps", "v1", "daemonsets", "DaemonSet", True, subresources=("status",)),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, subresources=("status",)),
    Resource("batch.volcano.sh", "v1alpha1", "jobs", "Job", True, "volcano", ("status",)),
    Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False, "volcano", ("status",)),
    Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True, "volcano", ("status",)),
    Resource("topology.volcano.sh", "v1alpha1", "hypernodes", "HyperNode", False, "volcano", ("status",)),
    Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", False, "kueue", ("status",)),
    Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue", True, "kueue", ("status",)),
    Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", False, "kueue"),
    Resource("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass", False, "kueue"),
    Resource("kueue.x-k8s.io", "v1beta2", "cohorts", "Cohort", False, "kueue", ("status",)),
    Resource("kueue.x-k8s.io", "v1beta2", "topologies", "Topology", False, "kueue"),
    Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", True, "kueue", ("status",)),
    Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True, "lws", ("status",)),
    Resource("keda.sh", "v1alpha1", "scaledobjects", "ScaledObject", True, "keda", ("status",)),
    Resource("keda.sh", "v1alpha1", "triggerauthentications", "TriggerAuthentication", True, "keda"),
    Resource("serving.kserve.io", "v1beta1", "inferenceservices", "InferenceService", True, "kserve", ("status",)),
    Resource("serving.kserve.io", "v1alpha1", "servingruntimes", "ServingRuntime", True, "kserve"),
    Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", True, "trainer", ("status",)),
    Resource("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", False, "trainer"),
)
ADDONS = ("kueue", "volcano", "lws", "keda", "kserve", "trainer")
# What a fake serves unless told otherwise: KServe and Kubeflow Trainer are opt-in (addons={..., "kserve"}).
DEFAULT_ADDONS = ("kueue", "volcano", "lws", "keda")


def served(addons: set[str]) -> list[Resource]:
    return [r for r in RESOURCES if not r.addon or r.addon in addons]


def find(resources: list[Resource], group: str, version: str, plural: str) -> Resource | None:
    return next((r for r in resources if (r.group, r.version, r.plural) == (group, version, plural)), None)
