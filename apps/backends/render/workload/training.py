"""Training jobs on Kubernetes: a Volcano Job, or a batch/v1 Indexed Job for Kueue, each running torchrun.

Every worker runs `torchrun ... --no-python -- <command> <args>`; `--` ends torchrun's options, so no
argument of the user's can be taken for one, and --no-python runs the command as given. Rendezvous is
c10d on worker 0's stable DNS name, which needs a headless Service (rendered for Kueue; Volcano's `svc`
plugin creates one named after the job and sets each pod's hostname and subdomain).

The endpoint is worker 0's fully qualified name because that is how torchrun recognises, on worker 0
itself, that it must host the rendezvous store: it compares the endpoint with the machine's hostname
and canonical name, and the kubelet's /etc/hosts gives a pod with a subdomain exactly that FQDN.
"""

from __future__ import annotations

from apps.backends.render.spec import TrainingJobSpec
from apps.backends.render.workload.common import (
    console_labels,
    container_resources,
    cpu_memory,
    env_list,
    kube_literal,
    meta,
    pod_annotations,
    pod_spec_base,
    pvc_volumes,
    queue_labels,
    selector,
    sharing_pool,
    shm_mount,
    shm_volume,
    volcano_queue,
)
from apps.backends.render.workload.context import RenderContext
from apps.backends.types import Sharing, Topology

RDZV_PORT = 29500
TASK = "worker"  # the Volcano task name; pods are "<job>-worker-<index>"
JOB_MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"


def torchrun_argv(
    spec: TrainingJobSpec, endpoint: str, rdzv_id: str, nnodes: str, *, nproc: int | None = None
) -> list[str]:
    """torchrun's command line; the user's program and arguments follow `--` untouched.

    One process per GPU of the worker (one for a shared GPU), unless `nproc` says otherwise.
    """
    per_node = nproc or (spec.gpus_per_worker if spec.sharing.mode == Sharing.WHOLE else 1)
    # Elastic jobs let torchrun restart its workers (re-rendezvous with whoever is left); a fixed gang
    # fails fast and the job controller (backoffLimit / Volcano policies) restarts the whole job.
    restarts = spec.retries if spec.elastic else 0
    return [
        "torchrun",
        f"--nnodes={nnodes}",
        f"--nproc-per-node={per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={rdzv_id}",
        f"--max-restarts={restarts}",
        "--no-python",
        "--",
        *spec.command,
        *spec.args,
    ]


def nnodes(spec: TrainingJobSpec) -> str:
    """torchrun's --nnodes: the fixed worker count, or the elastic min:max range."""
    return f"{spec.elastic.min_workers}:{spec.elastic.max_workers}" if spec.elastic else str(spec.workers)


def training_objects(spec: TrainingJobSpec, ctx: RenderContext, name: str) -> tuple[list[dict], list[str]]:
    """(objects, caveats) for the cluster's queueing system."""
    caveats = _caveats(spec, ctx)
    if ctx.queueing == "volcano":
        return [_volcano_job(spec, ctx, name)], caveats
    return [_headless_service(spec, ctx, name), _kueue_job(spec, ctx, name)], caveats


def _container(spec: TrainingJobSpec, ctx: RenderContext, name: str, worker0: str) -> dict:
    endpoint = f"{worker0}.{name}.{ctx.namespace}.svc.{ctx.cluster_domain}:{RDZV_PORT}"
    argv = torchrun_argv(spec, endpoint, name, nnodes(spec))
    env = {"CHECKPOINT_PATH": spec.elastic.checkpoint_path} if spec.elastic else {}
    env.update(spec.env)
    _, mounts = pvc_volumes(spec.volumes)
    container: dict = {
        "name": "trainer",
        "image": spec.image,
        "command": [kube_literal(arg) for arg in argv],
    }
    if env:
        container["env"] = env_list(env)
    container["ports"] = [{"name": "rdzv", "containerPort": RDZV_PORT}]
    container["resources"] = container_resources(spec, ctx)
    container["volumeMounts"] = [shm_mount(), *mounts]
    return container


def _pod_template(spec: TrainingJobSpec, ctx: RenderContext, name: str, worker0: str, *, volcano: bool) -> dict:
    labels = {**console_labels(spec, ctx), **selector(ctx)}
    annotations = pod_annotations(spec, ctx, queue_annotation=False)
    metadata: dict = {"labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    pod: dict = {"restartPolicy": "Never"}
    if not volcano:
        pod["subdomain"] = name  # the headless Service: pods resolve as <name>-<index>.<name>
    pod.update(pod_spec_base(spec, ctx, volcano_scheduler=False))
    affinity = _affinity(spec, ctx, volcano=volcano)
    if affinity:
        pod["affinity"] = affinity
    if volcano:
        # A Volcano Job has no job-wide deadline; each pod gets the max runtime (a restart resets it).
        pod["activeDeadlineSeconds"] = spec.max_runtime_s
    pod["containers"] = [_container(spec, ctx, name, worker0)]
    volumes, _ = pvc_volumes(spec.volumes)
    pod["volumes"] = [shm_volume(cpu_memory(spec)[1]), *volumes]
    return {"metadata": metadata, "spec": pod}


def _affinity(spec: TrainingJobSpec, ctx: RenderContext, *, volcano: bool) -> dict | None:
    """Required pod affinity on the topology level's node label: every worker lands where the first did.

    With Volcano, the NVLink and leaf levels use the Job's networkTopology instead (gang-aware).
    """
    if spec.topology == Topology.ANY or (volcano and spec.topology != Topology.NODE):
        return None
    term = {"labelSelector": {"matchLabels": selector(ctx)}, "topologyKey": ctx.topology_labels[spec.topology]}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _headless_service(spec: TrainingJobSpec, ctx: RenderContext, name: str) -> dict:
    """Stable DNS names for the Indexed Job's pods; not-ready addresses too, since rendezvous comes first."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name, ctx, console_labels(spec, ctx)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector(ctx),
            "ports": [{"name": "rdzv", "port": RDZV_PORT, "targetPort": RDZV_PORT}],
        },
    }


def _kueue_job(spec: TrainingJobSpec, ctx: RenderContext, name: str) -> dict:
    """An Indexed Job, created suspended: Kueue unsuspends it once the whole gang is admitted."""
    annotations = {}
    if spec.elastic and spec.elastic.min_workers < spec.workers:
        # Partial admission: Kueue may start it with fewer pods, down to the elastic minimum, and lowers
        # completions with parallelism so an Indexed Job still completes. Kueue accepts 1..parallelism-1.
        annotations[JOB_MIN_PARALLELISM] = str(spec.elastic.min_workers)
        annotations[COMPLETIONS_EQUAL_PARALLELISM] = "true"
    labels = {**console_labels(spec, ctx), **queue_labels(ctx)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(name, ctx, labels, annotations),
        "spec": {
            "suspend": True,
            "completionMode": "Indexed",
            "completions": spec.workers,
            "parallelism": spec.workers,
            "backoffLimit": spec.retries,
            "activeDeadlineSeconds": spec.max_runtime_s,
            "template": _pod_template(spec, ctx, name, f"{name}-0", volcano=False),
        },
    }


def _volcano_job(spec: TrainingJobSpec, ctx: RenderContext, name: str) -> dict:
    """A Volcano Job: gang of gang_min, the tier's priority, retries on eviction and failure."""
    if spec.elastic:
        # torchrun re-rendezvous with the remaining workers; a replaced pod joins at the next round.
        policies = [{"event": "PodEvicted", "action": "RestartPod"}, {"event": "PodFailed", "action": "RestartPod"}]
    else:
        policies = [{"event": "PodEvicted", "action": "RestartJob"}, {"event": "PodFailed", "action": "RestartJob"}]
    body: dict = {
        "schedulerName": "volcano",
        "queue": volcano_queue(spec, ctx),
        "priorityClassName": ctx.priority_class,
        "minAvailable": spec.gang_min,
        "maxRetry": spec.retries,
        "plugins": {"svc": []},
        "policies": policies,
    }
    if spec.topology in (Topology.NVLINK, Topology.LEAF):
        body["networkTopology"] = {"mode": "hard", "highestTierAllowed": ctx.volcano_tiers[spec.topology]}
    body["tasks"] = [
        {
            "name": TASK,
            "replicas": spec.workers,
            "template": _pod_template(spec, ctx, name, f"{name}-{TASK}-0", volcano=True),
        }
    ]
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": meta(name, ctx, console_labels(spec, ctx)),
        "spec": body,
    }


def _caveats(spec: TrainingJobSpec, ctx: RenderContext) -> list[str]:
    out = []
    if ctx.queueing == "kueue":
        if spec.gang_min < spec.workers and not spec.elastic:
            out.append(
                f"Kueue admits a Job whole: gang_min {spec.gang_min} below {spec.workers} workers cannot be "
                "expressed, so all workers are admitted together."
            )
        if spec.topology != Topology.ANY:
            out.append(
                f"Topology '{spec.topology}' is a required pod affinity on {ctx.topology_labels[spec.topology]}: "
                "kube-scheduler places the pods after Kueue admits the quota, without gang awareness. Kueue's "
                "Topology Aware Scheduling does this at admission once the GPU flavor has a Topology."
            )
        out.append(
            f"Kueue admits the pods' cpu, memory and GPU requests against the ClusterQueue's ResourceFlavor "
            f"'{sharing_pool(spec)}', the only one whose node labels the pods' node selector matches."
        )
    elif spec.topology in (Topology.NVLINK, Topology.LEAF):
        out.append(
            f"Topology '{spec.topology}' uses the Job's networkTopology (tier {ctx.volcano_tiers[spec.topology]}): "
            "the cluster needs Volcano HyperNodes describing its NVLink domains and leaf switches."
        )
    mode = spec.sharing.mode
    if mode == Sharing.MIG:
        out.append(
            f"MIG: the pods request nvidia.com/mig-{spec.sharing.mig_profile}, which the NVIDIA device plugin "
            "advertises with the 'mixed' MIG strategy; the queues count MIG instances of the profiles the "
            "cluster's inventory shows (GFD's nvidia.com/mig-<profile>.count labels)."
        )
    elif mode == Sharing.TIME_SLICE:
        out.append(
            f"Time-slicing: each worker requests one nvidia.com/gpu replica on a time-sliced pool (GPU Feature "
            f"Discovery labels: product '-SHARED', {spec.sharing.replicas} replicas per GPU), the pool "
            f"'{sharing_pool(spec)}' of the quota objects. Replicas share memory and faults."
        )
    elif mode == Sharing.HAMI and ctx.queueing == "volcano":
        out.append(
            "HAMi on Volcano: the pods request Volcano's vGPU resources (volcano.sh/vgpu-number, vgpu-memory in "
            "MiB, vgpu-cores in %) in hami-core mode; Volcano's scheduler places them with its deviceshare "
            "plugin (deviceshare.VGPUEnable) and the volcano-vgpu-device-plugin on the nodes."
        )
    elif mode == Sharing.HAMI:
        out.append(
            "HAMi: the pods request one vGPU with nvidia.com/gpumem (MiB) and nvidia.com/gpucores (%) on the "
            f"nodes HAMi's device plugin runs on; HAMi's webhook hands them to hami-scheduler, and Kueue counts "
            f"them in the flavor '{spec.gpu_model}-hami'."
        )
    if spec.elastic and not any(
        spec.elastic.checkpoint_path == v.mount_path or spec.elastic.checkpoint_path.startswith(v.mount_path + "/")
        for v in spec.volumes
        if not v.read_only
    ):
        out.append(
            f"The checkpoint path {spec.elastic.checkpoint_path} is on no writable volume: a restarted worker "
            "will not find the checkpoints of the one it replaces."
        )
    return out
