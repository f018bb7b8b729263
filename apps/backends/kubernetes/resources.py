"""Where each kind the console reads or applies lives in the API: plural, scope, add-on."""

from __future__ import annotations

from dataclasses import dataclass

from apps.backends.base import PermanentBackendError


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool
    addon: str = ""  # "" for built-ins

    @property
    def prefix(self) -> str:
        return f"/apis/{self.api_version}" if "/" in self.api_version else f"/api/{self.api_version}"

    def path(self, name: str = "", namespace: str = "") -> str:
        parts = [self.prefix]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        return "/".join(parts)


KINDS = [
    Kind("v1", "Namespace", "namespaces", False),
    Kind("v1", "ResourceQuota", "resourcequotas", True),
    Kind("v1", "Service", "services", True),
    Kind("v1", "ServiceAccount", "serviceaccounts", True),
    Kind("rbac.authorization.k8s.io/v1", "Role", "roles", True),
    Kind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True),
    Kind("v1", "Node", "nodes", False),
    Kind("v1", "Pod", "pods", True),
    Kind("v1", "Event", "events", True),
    Kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False),
    Kind("batch/v1", "Job", "jobs", True),
    Kind("apps/v1", "Deployment", "deployments", True),
    Kind("apps/v1", "DaemonSet", "daemonsets", True),
    Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True),
    Kind("batch.volcano.sh/v1alpha1", "Job", "jobs", True, "volcano"),
    Kind("scheduling.volcano.sh/v1beta1", "Queue", "queues", False, "volcano"),
    Kind("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass", "workloadpriorityclasses", False, "kueue"),
    Kind("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "resourceflavors", False, "kueue"),
    Kind("kueue.x-k8s.io/v1beta2", "Topology", "topologies", False, "kueue"),
    Kind("kueue.x-k8s.io/v1beta2", "Cohort", "cohorts", False, "kueue"),
    Kind("kueue.x-k8s.io/v1beta2", "ClusterQueue", "clusterqueues", False, "kueue"),
    Kind("kueue.x-k8s.io/v1beta2", "LocalQueue", "localqueues", True, "kueue"),
    Kind("kueue.x-k8s.io/v1beta2", "Workload", "workloads", True, "kueue"),
    Kind("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets", True, "lws"),
    Kind("keda.sh/v1alpha1", "ScaledObject", "scaledobjects", True, "keda"),
    Kind("keda.sh/v1alpha1", "TriggerAuthentication", "triggerauthentications", True, "keda"),
    Kind("serving.kserve.io/v1beta1", "InferenceService", "inferenceservices", True, "kserve"),
    Kind("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", True, "trainer"),
]
_BY_KEY = {(k.api_version, k.kind): k for k in KINDS}

NODE = _BY_KEY[("v1", "Node")]
POD = _BY_KEY[("v1", "Pod")]
EVENT = _BY_KEY[("v1", "Event")]
KUEUE_WORKLOAD = _BY_KEY[("kueue.x-k8s.io/v1beta2", "Workload")]  # read only: why Kueue has not admitted
TRAINJOB = _BY_KEY[("trainer.kubeflow.org/v1alpha1", "TrainJob")]
# Top-level workload objects, whose state is the workload's; the rest of a workload (Services, KEDA
# ScaledObjects) follows them.
WORKLOAD_KINDS = [
    _BY_KEY[("batch/v1", "Job")],
    _BY_KEY[("batch.volcano.sh/v1alpha1", "Job")],
    _BY_KEY[("apps/v1", "Deployment")],
    _BY_KEY[("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")],
    _BY_KEY[("serving.kserve.io/v1beta1", "InferenceService")],
    _BY_KEY[("trainer.kubeflow.org/v1alpha1", "TrainJob")],
]
COMPANION_KINDS = [
    _BY_KEY[("keda.sh/v1alpha1", "ScaledObject")],
    _BY_KEY[("v1", "Service")],
    _BY_KEY[("policy/v1", "PodDisruptionBudget")],
]
# A routed inference service's other parts (apps/backends/render/workload/router.py): its router and prefill
# Deployments beside the top one, and the router's account and pod-reading Role. Cancel deletes them by the
# workload label like the companions.
ROUTED_KINDS = [
    _BY_KEY[("apps/v1", "Deployment")],
    _BY_KEY[("v1", "ServiceAccount")],
    _BY_KEY[("rbac.authorization.k8s.io/v1", "Role")],
    _BY_KEY[("rbac.authorization.k8s.io/v1", "RoleBinding")],
]
# An inference service's warm-weights Job (apps/backends/render/workload/warm.py): cancel deletes it by the workload
# label with the companions.
WARM_KINDS = [_BY_KEY[("batch/v1", "Job")]]
# What the quota renderers produce (the drift report lists these by the console's label).
QUOTA_KINDS = [
    _BY_KEY[("scheduling.k8s.io/v1", "PriorityClass")],
    _BY_KEY[("v1", "Namespace")],
    _BY_KEY[("v1", "ResourceQuota")],
    _BY_KEY[("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass")],
    _BY_KEY[("kueue.x-k8s.io/v1beta2", "ResourceFlavor")],
    _BY_KEY[("kueue.x-k8s.io/v1beta2", "Cohort")],
    _BY_KEY[("kueue.x-k8s.io/v1beta2", "ClusterQueue")],
    _BY_KEY[("kueue.x-k8s.io/v1beta2", "LocalQueue")],
    _BY_KEY[("scheduling.volcano.sh/v1beta1", "Queue")],
    _BY_KEY[("apps/v1", "DaemonSet")],  # node pools' image pre-pulls (apps/backends/render/prepull.py)
]

# Quota objects the push deletes once the desired state no longer holds them (see quota.py: why only these).
PRUNED_KINDS = [_BY_KEY[("kueue.x-k8s.io/v1beta2", "LocalQueue")], _BY_KEY[("apps/v1", "DaemonSet")]]


def kind_of(obj: dict) -> Kind:
    found = _BY_KEY.get((obj.get("apiVersion"), obj.get("kind")))
    if found is None:
        raise PermanentBackendError(f"the console does not know where {obj.get('kind')} {obj.get('apiVersion')} lives")
    return found


def object_path(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return kind_of(obj).path(meta.get("name", ""), meta.get("namespace", ""))
