"""Training jobs as a Kubeflow Trainer TrainJob (trainer.kubeflow.org/v1alpha1), for `training_target: trainjob`.

The TrainJob names a ClusterTrainingRuntime (the cluster's `trainjob_runtime`, by default `torch-distributed`, the
runtime the Trainer ships for PyTorch) and overrides what the job needs
(https://www.kubeflow.org/docs/components/trainer/operator-guides/runtime/, the pinned CRD's field descriptions):

- `trainer`: the image, `numNodes` (the spec's workers), `resourcesPerNode` (GPUs, cpu, memory as the Job renderer
  requests them), `numProcPerNode` (one process per GPU), env, and the command: `torchrun --max-restarts=N
  --no-python -- <command>` with the spec's args. torchrun takes --nnodes, --nproc-per-node, --node-rank and the
  master address from the PET_* variables the runtime's torch plugin sets
  (https://www.kubeflow.org/docs/components/trainer/operator-guides/ml-policy/; torchrun reads every option from a
  PET_<OPTION> variable: https://pytorch.org/docs/stable/elastic/run.html).
- `podSpecOverrides` for the runtime's `node` job: the node selector of the GPU pool, the pool's tolerations, the
  spec's volumes and /dev/shm, mounted in the `node` container.
- `labels` (set on the JobSet and its Jobs) carry the console's labels; the TrainJob's own labels carry Kueue's
  LocalQueue and WorkloadPriorityClass. Kueue's TrainJob integration (https://kueue.sigs.k8s.io/docs/tasks/run/trainjobs/)
  suspends it at creation and starts it once the whole job is admitted.

What the pinned Trainer API (2025-02) cannot carry is said in the caveats (a deadline, a pod priority class, the
number of retries, an elastic range) or refused (a topology constraint: podSpecOverrides have no affinity).
"""

from __future__ import annotations

from apps.backends.render.errors import RenderError
from apps.backends.render.spec import TrainingJobSpec
from apps.backends.render.workload.common import (
    console_labels,
    container_resources,
    cpu_memory,
    env_list,
    kube_literal,
    meta,
    network,
    network_env,
    node_selector,
    pvc_volumes,
    queue_labels,
    selector,
    sharing_pool,
    shm_mount,
    shm_volume,
    tolerations,
)
from apps.backends.render.workload.context import RenderContext
from apps.backends.types import Sharing, Topology

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
NODE = "node"  # the runtime's trainer job and container, which the overrides target


def trainjob_objects(spec: TrainingJobSpec, ctx: RenderContext, name: str) -> tuple[list[dict], list[str]]:
    """(objects, caveats) for one job on a cluster whose training target is trainjob."""
    if spec.topology != Topology.ANY:
        raise RenderError(
            "topology",
            f"'{spec.topology}' cannot be expressed on a TrainJob: the pinned Kubeflow Trainer API's podSpecOverrides "
            "have no affinity (use topology any, or a cluster whose training_target is kueue-job)",
        )
    return [_trainjob(spec, ctx, name)], _caveats(spec, ctx)


def _command(spec: TrainingJobSpec) -> list[str]:
    restarts = spec.retries if spec.elastic else 0
    return ["torchrun", f"--max-restarts={restarts}", "--no-python", "--", *spec.command]


def _trainjob(spec: TrainingJobSpec, ctx: RenderContext, name: str) -> dict:
    per_node = spec.gpus_per_worker if spec.sharing.mode == Sharing.WHOLE else 1
    trainer: dict = {
        "image": spec.image,
        "command": [kube_literal(arg) for arg in _command(spec)],
    }
    if spec.args:
        trainer["args"] = [kube_literal(arg) for arg in spec.args]
    env = network_env(spec, ctx)
    if spec.elastic:
        env["CHECKPOINT_PATH"] = spec.elastic.checkpoint_path
    env.update(spec.env)
    if env or spec.secret_env:
        trainer["env"] = env_list(env, spec.secret_env)
    trainer["numNodes"] = spec.workers
    trainer["numProcPerNode"] = per_node
    trainer["resourcesPerNode"] = container_resources(spec, ctx)
    volumes, mounts = pvc_volumes(spec.volumes)
    override: dict = {
        "targetJobs": [{"name": NODE}],
        "nodeSelector": node_selector(spec, ctx),
    }
    taints = tolerations(spec, ctx)
    if taints:
        override["tolerations"] = taints
    override["volumes"] = [shm_volume(cpu_memory(spec)[1]), *volumes]
    override["containers"] = [{"name": NODE, "volumeMounts": [shm_mount(), *mounts]}]
    body = {
        "runtimeRef": {
            "apiGroup": "trainer.kubeflow.org",
            "kind": "ClusterTrainingRuntime",
            "name": ctx.trainjob_runtime,
        },
        "trainer": trainer,
        "labels": {**console_labels(spec, ctx), **selector(ctx)},
        "podSpecOverrides": [override],
    }
    labels = {**console_labels(spec, ctx), **queue_labels(ctx)}
    return {"apiVersion": TRAINER_API, "kind": "TrainJob", "metadata": meta(name, ctx, labels), "spec": body}


def _caveats(spec: TrainingJobSpec, ctx: RenderContext) -> list[str]:
    out = [
        f"The TrainJob runs the cluster's ClusterTrainingRuntime '{ctx.trainjob_runtime}' (setting trainjob_runtime): "
        f"it must exist (the Trainer's webhook refuses the TrainJob otherwise), with a replicated job and container "
        f"named '{NODE}' and the torch ML policy, as the Trainer's torch-distributed runtime has.",
        f"Kueue manages it only with its trainer.kubeflow.org/trainjob integration enabled, and admits the whole job "
        f"({spec.workers} nodes) against the ClusterQueue's ResourceFlavor '{sharing_pool(spec)}'.",
        f"The pinned Trainer API has no deadline, retry count or pod priority class per TrainJob: max_runtime_s "
        f"({spec.max_runtime_s} s) and retries ({spec.retries}) are not enforced by the cluster, and the pods get the "
        f"runtime's priority class (Kueue still orders the job by the WorkloadPriorityClass '{ctx.priority_class}').",
        "The TrainJob's labels reach its JobSet and Jobs, not its pods: the console finds the pods by their JobSet "
        "label (status, metering), while other tools that select the console's pod labels do not see them.",
    ]
    if spec.elastic:
        out.append(
            f"Elastic {spec.elastic.min_workers}..{spec.elastic.max_workers} workers is not expressed: a TrainJob "
            f"runs a fixed numNodes ({spec.workers}) and Kueue admits it whole (an elastic range lives in the "
            "runtime's torch.elasticPolicy, which is shared by every job of that runtime); torchrun restarts the "
            f"workers up to {spec.retries} times from the checkpoint path."
        )
    elif spec.gang_min < spec.workers:
        out.append(
            f"gang_min {spec.gang_min} below {spec.workers} workers cannot be expressed: the TrainJob starts all its "
            "nodes together."
        )
    plan = network(spec, ctx)
    if plan.ipc_lock:
        out.append(
            f"RDMA: the pinned Trainer API's podSpecOverrides have no securityContext, so the runtime "
            f"'{ctx.trainjob_runtime}' must give its '{NODE}' container the IPC_LOCK capability (RDMA pins memory)."
        )
    if plan.pod_networks:
        out.append(
            f"The pool's networks ({plan.pod_networks}) go in the pods' k8s.v1.cni.cncf.io/networks annotation, which "
            f"a TrainJob cannot set on its pods: the runtime '{ctx.trainjob_runtime}' must carry it."
        )
    return out
