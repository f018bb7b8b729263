"""Pieces every Kubernetes workload object shares: names, labels, quoting, GPU resources, placement, volumes.

Two kinds of quoting matter here, and both are exact:

* `kube_literal`: the kubelet expands `$(VAR)` in a container's command, args and env values, and turns
  `$$` into `$`. Doubling every `$` makes the container receive the string exactly as given.
* `sh_quote`: for the few places a shell runs (a multi-node leader script, the sbatch script), every value
  is one shell word that the shell turns back into exactly that string; control characters use $'...' so
  no value can ever start a new line of the script.
"""

from __future__ import annotations

import hashlib
import re
import shlex

from apps.backends.render.errors import RenderError
from apps.backends.render.names import dns_label, is_dns_label, is_dns_subdomain, is_label_value, is_qualified_name
from apps.backends.render.objects import (
    GPU_RESOURCE,
    MANAGED_BY,
    MANAGER,
    PRODUCT_LABEL,
    QUEUE_LABEL,
    TAINT_EFFECTS,
    TENANT_LABEL,
    toleration,
)
from apps.backends.render.pools import (
    CPU_PER_GPU,
    HAMI_CORES,
    HAMI_MEMORY,
    MEMORY_GIB_PER_GPU,
    VGPU_CORES,
    VGPU_MEMORY,
    VGPU_NUMBER,
    pool_name,
    replicated_labels,
)
from apps.backends.render.spec import InferenceServiceSpec, SecretEnv, Spec, TrainingJobSpec, Volume
from apps.backends.render.topology import TAS_REQUIRED, TAS_UNCONSTRAINED
from apps.backends.render.volcano import leaf_queue_name
from apps.backends.render.volcano import resource_name as volcano_resource_name
from apps.backends.render.workload.context import QUEUEINGS, RenderContext, target_errors
from apps.backends.render.workload.network import IPC_LOCK, MULTUS_ANNOTATION, NetworkPlan, fabric_errors, network_plan
from apps.backends.types import REPLICATED, Sharing, Topology

WORKLOAD_LABEL = "gpu-console/workload"
KIND_LABEL = "gpu-console/kind"
ROLE_LABEL = "gpu-console/role"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
VOLCANO_PREEMPTABLE = "volcano.sh/preemptable"
VGPU_MODE_ANNOTATION = "volcano.sh/vgpu-mode"  # hami-core: software slicing, not a MIG instance
# Pod names derive from the object name (StatefulSet pods "<name>-<group>-<i>", Volcano "<name>-worker-<i>")
# and a StatefulSet name above 52 characters breaks its controller-revision-hash label: keep room.
OBJECT_NAME_MAX = 48
SHM_MAX_GIB = 16
_HASH = 8
_PRINTABLE = re.compile(r"[\x20-\x7e\u00a0-\U0010ffff]*")
# "<tenant>-<queue>": two DNS-1123 labels joined by '-' (the objects' names are derived from it, shortened).
_QUEUE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,125}[a-z0-9])?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")  # a Secret's data key (the API server's IsConfigMapKey)


def kube_literal(value: str) -> str:
    """`value` as the kubelet will pass it on: `$(VAR)` is expanded and `$$` means `$`, so double every `$`."""
    return value.replace("$", "$$")


def sh_quote(value: str) -> str:
    """One POSIX-shell word meaning exactly `value`; bash's $'...' when it holds control characters.

    Inside $'...' a control character is written as the \\xHH escapes of its UTF-8 bytes, which bash turns
    back into those bytes whatever the locale; the script text itself then holds no raw newline.
    """
    if _PRINTABLE.fullmatch(value):
        return shlex.quote(value)
    out = []
    for char in value:
        if char == "\\":
            out.append("\\\\")
        elif char == "'":
            out.append("\\'")
        elif _PRINTABLE.fullmatch(char):
            out.append(char)
        else:
            out.append("".join(f"\\x{byte:02x}" for byte in char.encode()))
    return "$'" + "".join(out) + "'"


def sh_join(argv: list[str]) -> str:
    return " ".join(sh_quote(arg) for arg in argv)


def short_name(name: str, limit: int = OBJECT_NAME_MAX) -> str:
    """`name` if it fits `limit`, else a prefix plus 8 hex digits of its SHA-256: stable and distinct."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH]
    return f"{name[: limit - _HASH - 1].rstrip('-')}-{digest}"


def object_name(spec: Spec, ctx: RenderContext) -> str:
    name = ctx.name or spec.name
    if not is_dns_label(name):
        raise RenderError("name", f"{name!r} is not a DNS-1123 label")
    return short_name(name)


def check_context(ctx: RenderContext) -> None:
    """Everything from the context that lands in a name, label or selector is valid, or RenderError."""
    if ctx.queueing not in QUEUEINGS:
        raise RenderError("queueing", f"{ctx.queueing!r} is not one of {', '.join(QUEUEINGS)}")
    problems = target_errors(
        {
            "queueing": ctx.queueing,
            "inference_target": ctx.inference_target,
            "training_target": ctx.training,
            "trainjob_runtime": ctx.trainjob_runtime,
        }
    )
    if problems:
        field, _, message = problems[0].partition(": ")
        raise RenderError(field, message)
    for what, value in (("namespace", ctx.namespace), ("priority_class", ctx.priority_class)):
        if not is_dns_label(value):
            raise RenderError(what, f"{value!r} is not a DNS-1123 label")
    if not _QUEUE_NAME.fullmatch(ctx.queue_name):
        raise RenderError("queue_name", f"{ctx.queue_name!r} is not a valid queue name ('<tenant>-<queue>')")
    if not str(ctx.workload_id) or not is_label_value(str(ctx.workload_id)):
        raise RenderError("workload_id", f"{ctx.workload_id!r} is not a valid label value")
    if not ctx.product_label or not is_label_value(ctx.product_label):
        raise RenderError("product_label", f"{ctx.product_label!r} is not a valid nvidia.com/gpu.product value")
    if ctx.gpu_resource and not is_qualified_name(ctx.gpu_resource):
        raise RenderError("gpu_resource", f"{ctx.gpu_resource!r} is not a resource name")
    if not isinstance(ctx.gpus_per_node, int) or ctx.gpus_per_node < 1:
        raise RenderError("gpus_per_node", f"must be a positive integer, not {ctx.gpus_per_node!r}")
    for level in (Topology.NODE, Topology.NVLINK, Topology.LEAF):
        label = ctx.topology_labels.get(level)
        if not isinstance(label, str) or not is_qualified_name(label):
            raise RenderError(f"topology_labels.{level}", f"{label!r} is not a node label key")
    for key, value in ctx.hami_node_labels.items():
        if not is_qualified_name(key) or not isinstance(value, str) or not is_label_value(value):
            raise RenderError("hami_node_labels", f"{key!r}: {value!r} is not a node label and value")
    if ctx.fabric is not None and (problems := fabric_errors(ctx.fabric, "kubernetes")):
        field, message = problems[0]
        raise RenderError(f"fabric.{field}", message)


def check_env_names(env: dict[str, str]) -> None:
    """parse_spec validates names already; a spec built by hand must not put a shell word in one either."""
    for name in env:
        if not _ENV_NAME.fullmatch(name):
            raise RenderError(f"env.{name}", "is not an environment variable name")


def check_spec_labels(spec: Spec) -> None:
    """Tenant and queue become label values (parse_spec guarantees it; a hand-built spec might not)."""
    for what in ("tenant", "queue"):
        if not is_dns_label(getattr(spec, what)):
            raise RenderError(what, f"{getattr(spec, what)!r} is not a DNS-1123 label")


def volcano_resource_caveat(spec: Spec, ctx: RenderContext) -> list[str]:
    """With Volcano on a site that renames GPUs per model, the pods count GPUs under that name."""
    if ctx.queueing != "volcano" or ctx.gpu_resource or not ctx.per_model_gpu_resources:
        return []
    return [
        f"Volcano: the pods request {gpu_resource(spec, ctx)}, the per-model GPU resource the Volcano queues "
        "quota (volcano_per_model_resources); the node pool's device plugin must advertise its GPUs under that "
        "name."
    ]


def sharing_pool(spec: Spec) -> str:
    """The GPU pool (pools.py) the workload's pods land on: the model's, or its time-sliced or MPS pool."""
    if isinstance(spec, TrainingJobSpec) and spec.sharing.mode in REPLICATED:
        return pool_name(spec.gpu_model, spec.sharing.mode, spec.sharing.replicas)
    return pool_name(spec.gpu_model)


def volcano_queue(spec: Spec, ctx: RenderContext) -> str:
    """The Volcano leaf queue of the workload: its queue's leaf in its GPU pool (volcano.py)."""
    return leaf_queue_name(ctx.queue_name, sharing_pool(spec))


def console_labels(spec: Spec, ctx: RenderContext) -> dict[str, str]:
    """What every object carries: managed-by (the apply step finds what it owns), tenant, queue, workload."""
    return {
        MANAGED_BY: MANAGER,
        TENANT_LABEL: spec.tenant,
        QUEUE_LABEL: spec.queue,
        WORKLOAD_LABEL: str(ctx.workload_id),
        KIND_LABEL: spec.kind,
    }


def selector(ctx: RenderContext) -> dict[str, str]:
    """Pods of one workload: the console's workload id is unique, unlike names."""
    return {WORKLOAD_LABEL: str(ctx.workload_id)}


def queue_labels(ctx: RenderContext) -> dict[str, str]:
    """Kueue reads these on the top-level object (Job, Deployment, LeaderWorkerSet)."""
    if ctx.queueing != "kueue":
        return {}
    # The LocalQueue's name, as the quota renderer derives it from "<tenant>-<queue>" (kueue.cluster_queue_name).
    return {KUEUE_QUEUE_LABEL: dns_label(ctx.queue_name), KUEUE_PRIORITY_LABEL: ctx.priority_class}


def pod_annotations(spec: Spec, ctx: RenderContext, *, queue_annotation: bool) -> dict[str, str]:
    """Volcano: the queue of plain pods (not needed inside a Volcano Job), the non-preemptible marker, and for
    a HAMi share Volcano's vGPU mode (hami-core, not a MIG instance the scheduler might otherwise pick)."""
    out: dict[str, str] = {}
    networks = network(spec, ctx).pod_networks
    if networks:
        out[MULTUS_ANNOTATION] = networks  # Multus attaches the pool's networks (RoCE's IP interface)
    if ctx.queueing == "volcano":
        if queue_annotation:
            out[VOLCANO_QUEUE_ANNOTATION] = volcano_queue(spec, ctx)
        if not ctx.preemptible:
            out[VOLCANO_PREEMPTABLE] = "false"
        if isinstance(spec, TrainingJobSpec) and spec.sharing.mode == Sharing.HAMI:
            out[VGPU_MODE_ANNOTATION] = "hami-core"
    out.update(tas_annotations(spec, ctx))
    return out


def tas_annotations(spec: Spec, ctx: RenderContext) -> dict[str, str]:
    """Kueue's Topology Aware Scheduling (topology_scheduler kueue-tas): the pod set's topology request.

    Only the model's whole-GPU pool (its MIG instances included) has a Topology (render/topology.py): its pods
    carry `podset-required-topology` with the node label of a training job's topology level, or
    `podset-unconstrained-topology` (Kueue skips a TAS flavor for a pod set without a request in a ClusterQueue
    that also has other flavors); time-sliced and HAMi pools are not TAS flavors, and their pods carry none
    (https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/). A level the model's Topology lacks
    (no node of the model carries its label) is refused, naming the field.
    """
    if ctx.queueing != "kueue" or ctx.topology_scheduler != "kueue-tas":
        return {}
    training = isinstance(spec, TrainingJobSpec)
    if training and spec.sharing.mode in (Sharing.TIME_SLICE, Sharing.HAMI):
        return {}
    if not training or spec.topology == Topology.ANY:
        return {TAS_UNCONSTRAINED: "true"}
    level = ctx.topology_labels[spec.topology]
    if ctx.topology_levels is not None and level not in ctx.topology_levels:
        raise RenderError(
            "topology",
            f"'{spec.topology}' is Kueue's topology level {level}, which the {spec.gpu_model} Topology of this "
            f"cluster does not have: no {spec.gpu_model} node carries that label (levels: "
            f"{', '.join(ctx.topology_levels) or 'none'})",
        )
    return {TAS_REQUIRED: level}


def meta(name: str, ctx: RenderContext, labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict:
    out: dict = {"name": name, "namespace": ctx.namespace, "labels": labels}
    if annotations:
        out["annotations"] = annotations
    return out


# --- GPUs, CPU and memory ------------------------------------------------------------------------------


def gpu_resource(spec: Spec, ctx: RenderContext) -> str:
    """The extended resource that counts this model's GPUs on this cluster (see RenderContext)."""
    if ctx.gpu_resource:
        return ctx.gpu_resource
    if ctx.queueing == "volcano" and ctx.per_model_gpu_resources:
        return volcano_resource_name(spec.gpu_model)
    return GPU_RESOURCE


def gpu_requests(spec: Spec, ctx: RenderContext) -> dict[str, str]:
    """Extended resources one pod requests, per sharing mode (MIG assumes the device plugin's mixed strategy).

    A HAMi share: with Kueue, HAMi's own resources (its webhook hands the pod to hami-scheduler); with Volcano,
    whose scheduler must keep the pod, Volcano's vGPU resources instead (its vGPU device plugin is HAMi's
    fork: https://github.com/volcano-sh/volcano/blob/master/docs/user-guide/how_to_use_volcano_vgpu.md).
    Where the cluster's settings say it has no such pool, RenderError names the setting.
    """
    name = gpu_resource(spec, ctx)
    if isinstance(spec, InferenceServiceSpec):
        return {name: str(spec.gpus_per_pod)}
    sharing = spec.sharing
    if sharing.mode == Sharing.MIG:
        return {f"nvidia.com/mig-{sharing.mig_profile}": "1"}
    if sharing.mode == Sharing.HAMI:
        if ctx.queueing == "volcano":
            if not ctx.volcano_vgpu:
                raise RenderError(
                    "sharing.mode",
                    "HAMi on a Volcano cluster runs as Volcano's vGPU device plugin (volcano.sh/vgpu-*), which "
                    "this cluster's settings do not declare (volcano_vgpu); HAMi's own scheduler would take the "
                    "pods from Volcano's queues",
                )
            return {VGPU_NUMBER: "1", VGPU_MEMORY: str(sharing.gpumem_mib), VGPU_CORES: str(sharing.gpucores)}
        if not ctx.hami_node_labels:
            raise RenderError(
                "sharing.mode",
                'this cluster\'s settings name no HAMi nodes (hami_node_labels, e.g. gpu: "on", the labels '
                "HAMi's device plugin runs on), so no Kueue flavor covers nvidia.com/gpumem and nvidia.com/gpucores",
            )
        return {name: "1", HAMI_MEMORY: str(sharing.gpumem_mib), HAMI_CORES: str(sharing.gpucores)}
    if sharing.mode in REPLICATED:
        # One replica of a time-sliced or MPS GPU; the node selector picks such a pool. MPS takes no more than one
        # (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing-mps.html#limitations).
        return {name: "1"}
    return {name: str(spec.gpus_per_worker)}


def cpu_memory(spec: Spec) -> tuple[int, int]:
    """Cores and GiB per pod: the spec's, else 8 cores and 64 GiB per whole GPU (4 and 16 for a share).

    Kubernetes needs explicit requests: a GPU pod without CPU and memory requests is BestEffort and the
    first to be evicted under memory pressure. The quota renderer's cpu and memory per GPU without inventory
    are the same per-GPU defaults (pools.CPU_PER_GPU, MEMORY_GIB_PER_GPU).
    """
    if isinstance(spec, TrainingJobSpec) and spec.sharing.mode != Sharing.WHOLE:
        cpu, memory = 4, 16
    else:
        gpus = spec.gpus_per_worker if isinstance(spec, TrainingJobSpec) else spec.gpus_per_pod
        cpu, memory = CPU_PER_GPU * gpus, MEMORY_GIB_PER_GPU * gpus
    return spec.cpu or cpu, spec.memory_gib or memory


def container_resources(spec: Spec, ctx: RenderContext) -> dict:
    """Requests = limits for GPUs and the RDMA device (extended resources cannot be overcommitted) and memory;
    CPU may burst."""
    cpu, memory = cpu_memory(spec)
    devices = {**gpu_requests(spec, ctx), **network(spec, ctx).resources}
    return {
        "requests": {"cpu": str(cpu), "memory": f"{memory}Gi", **devices},
        "limits": {"memory": f"{memory}Gi", **devices},
    }


# --- the network between nodes (network.py) --------------------------------------------------------------------


def network(spec: Spec, ctx: RenderContext) -> NetworkPlan:
    """How the workload's ranks talk on this pool (RenderError("network") for rdma where the pool has none)."""
    return network_plan(spec, ctx.fabric)


def network_env(spec: Spec, ctx: RenderContext) -> dict[str, str]:
    """NCCL's environment for the pool's fabric; the spec's own env, merged after it, wins."""
    return dict(network(spec, ctx).env)


def security_context(spec: Spec, ctx: RenderContext) -> dict | None:
    """RDMA pins the memory it transfers: the container may lock memory (IPC_LOCK), as the RDMA device plugins'
    examples require; None when the workload does not use RDMA."""
    return {"capabilities": {"add": [IPC_LOCK]}} if network(spec, ctx).ipc_lock else None


def node_selector(spec: Spec, ctx: RenderContext) -> dict[str, str]:
    """The labels of the workload's GPU pool, as its Kueue ResourceFlavor has them (pools.py), so that flavor
    and no other fits it: the GPU product; a time-sliced or MPS pool's GFD labels add -SHARED, the replica count
    and the sharing strategy; HAMi's pool (Kueue) adds the labels HAMi's device plugin runs on."""
    if isinstance(spec, TrainingJobSpec) and spec.sharing.mode == Sharing.HAMI and ctx.queueing == "kueue":
        return {PRODUCT_LABEL: ctx.product_label, **ctx.hami_node_labels}
    if isinstance(spec, TrainingJobSpec) and spec.sharing.mode in REPLICATED:
        labels = dict(replicated_labels(ctx.product_label, spec.sharing.mode, spec.sharing.replicas))
        if not is_label_value(labels[PRODUCT_LABEL]):
            raise RenderError("product_label", f"{labels[PRODUCT_LABEL]!r} (shared) is not a valid label value")
        return labels
    return {PRODUCT_LABEL: ctx.product_label}


def tolerations(spec: Spec, ctx: RenderContext) -> list[dict]:
    """The node pool's taints as tolerations (Equal with a value, Exists without one), then the spec's own."""
    out = _pool_tolerations(ctx)
    for i, wanted in enumerate(spec.tolerations):
        where = f"spec tolerations[{i}]"
        if not is_qualified_name(wanted.key):
            raise RenderError(f"{where}.key", f"{wanted.key!r} is not a taint key")
        if wanted.operator not in ("Equal", "Exists"):
            raise RenderError(f"{where}.operator", f"{wanted.operator!r} is not Equal or Exists")
        if not is_label_value(wanted.value) or (wanted.operator == "Exists" and wanted.value):
            raise RenderError(f"{where}.value", f"{wanted.value!r} is not a value for operator {wanted.operator}")
        if wanted.effect and wanted.effect not in TAINT_EFFECTS:
            raise RenderError(f"{where}.effect", f"{wanted.effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
        item = toleration(wanted.key, wanted.operator, wanted.value, wanted.effect)
        if item not in out:
            out.append(item)
    return out


def _pool_tolerations(ctx: RenderContext) -> list[dict]:
    out = []
    for i, taint in enumerate(ctx.tolerations):
        where = f"tolerations[{i}]"
        key, value, effect = taint.get("key", ""), taint.get("value", ""), taint.get("effect", "")
        if not isinstance(key, str) or not is_qualified_name(key):
            raise RenderError(f"{where}.key", f"{key!r} is not a taint key")
        if not isinstance(value, str) or not is_label_value(value):
            raise RenderError(f"{where}.value", f"{value!r} is not a taint value")
        if effect and effect not in TAINT_EFFECTS:
            raise RenderError(f"{where}.effect", f"{effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
        out.append(toleration(key, "Equal" if value else "Exists", value, effect))
    return out


# --- env and volumes -------------------------------------------------------------------------------------


def env_list(env: dict[str, str], secret_env: list[SecretEnv] | None = None) -> list[dict]:
    """Literal values (each through kube_literal), then each Secret reference as valueFrom.secretKeyRef; a
    reference replaces a literal of the same name (a default the renderer set, such as HF_HOME)."""
    refs = secret_env or []
    named = {ref.name for ref in refs}
    out: list[dict] = [{"name": name, "value": kube_literal(value)} for name, value in env.items() if name not in named]
    out += [{"name": ref.name, "valueFrom": {"secretKeyRef": {"name": ref.secret, "key": ref.key}}} for ref in refs]
    return out


def check_secret_env(spec: Spec) -> None:
    """parse_spec validates the references; a spec built by hand must hold names Kubernetes accepts too."""
    for i, ref in enumerate(spec.secret_env):
        where = f"secret_env[{i}]"
        if not _ENV_NAME.fullmatch(ref.name) or ref.name in spec.env:
            raise RenderError(f"{where}.name", f"{ref.name!r} is not a variable name, or is also in env")
        if not is_dns_subdomain(ref.secret):
            raise RenderError(f"{where}.secret", f"{ref.secret!r} is not a Secret name (a DNS subdomain)")
        if not _SECRET_KEY.fullmatch(ref.key) or ref.key in (".", "..") or ref.key.startswith(".."):
            raise RenderError(f"{where}.key", f"{ref.key!r} is not a key of a Secret")


def shm_volume(memory_gib: int) -> dict:
    """Shared memory in RAM: NCCL and DataLoader workers need more than the runtime's 64 MiB default.

    It counts against the pod's memory, so it is capped at half the memory request (and 16 GiB).
    """
    size = max(1, min(SHM_MAX_GIB, memory_gib // 2))
    return {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{size}Gi"}}


def shm_mount() -> dict:
    return {"name": "dshm", "mountPath": "/dev/shm"}  # noqa: S108 - a mount point, not a temporary file


def pvc_volumes(volumes: list[Volume]) -> tuple[list[dict], list[dict]]:
    """(pod volumes, container mounts) for the spec's PVCs, named data-<index> (claims may repeat)."""
    pod, mounts = [], []
    for i, volume in enumerate(volumes):
        name = f"data-{i}"
        claim: dict = {"claimName": volume.claim}
        if volume.read_only:
            claim["readOnly"] = True
        pod.append({"name": name, "persistentVolumeClaim": claim})
        mount: dict = {"name": name, "mountPath": volume.mount_path}
        if volume.read_only:
            mount["readOnly"] = True
        mounts.append(mount)
    return pod, mounts


def pod_spec_base(spec: Spec, ctx: RenderContext, *, volcano_scheduler: bool) -> dict:
    """Fields every pod of the workload shares, in a stable key order."""
    out: dict = {}
    if volcano_scheduler and ctx.queueing == "volcano":
        out["schedulerName"] = "volcano"
    out["priorityClassName"] = ctx.priority_class
    out["nodeSelector"] = node_selector(spec, ctx)
    taints = tolerations(spec, ctx)
    if taints:
        out["tolerations"] = taints
    return out
