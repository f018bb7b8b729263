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
    network_env,
    pod_annotations,
    pod_spec_base,
    pvc_volumes,
    queue_labels,
    security_context,
    selector,
    sharing_pool,
    shm_mount,
    shm_volume,
    volcano_queue,
)
from apps.backends.render.workload.context import RenderContext
from apps.backends.types import Sharing, Topology

RDZV_PORT = 29500
SHARED_POOLS = (Sharing.TIME_SLICE, Sharing.HAMI)  # their pools are not Kueue TAS flavors (render/topology.py)
TASK = "worker"  # the Volcano task name; pods are "<job>-worker-<index>"
JOB_MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"


def torchrun_argv(
    spec: TrainingJobSpec,
    endpoint: str,
    rdzv_id: str,
    nnodes: str,
    *,
    nproc: int | None = None,
    late_joiners: int = 0,
) -> list[str]:
    """torchrun's command line; the user's program and arguments follow `--` untouched.

    One process per GPU of the worker (one for a shared GPU), unless `nproc` says otherwise. `late_joiners`:
    how many workers may join after the rendezvous first completes (a gang started below its size).

    --max-restarts: torchrun's docs count every restart against it, "regardless of whether the restart was
    caused due to a failure or a scaling event" (NUM_ALLOWED_FAILURES_OR_MEMBERSHIP_CHANGES,
    https://pytorch.org/docs/stable/elastic/quickstart.html), and a worker that joins a running group restarts
    it: so each possible late joiner adds one, besides the failures an elastic job may survive (its retries).
    A fixed gang fails fast on a failure, and the job controller (backoffLimit / Volcano policies) restarts it.
    """
    per_node = nproc or (spec.gpus_per_worker if spec.sharing.mode == Sharing.WHOLE else 1)
    restarts = (spec.retries if spec.elastic else 0) + late_joiners
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


def node_range(spec: TrainingJobSpec, ctx: RenderContext) -> tuple[int, int]:
    """(fewest, most) workers torchrun's rendezvous must accept: what the scheduler may start the job with.

    Elastic: its min..max. A gang that Volcano may start below its size (minAvailable = gang_min < workers):
    gang_min..workers, since torchrun with a fixed --nnodes=<workers> would wait at rendezvous for workers the
    scheduler never promised, and time out. Otherwise (Kueue admits a non-elastic Job whole) all the workers.
    """
    if spec.elastic:
        return spec.elastic.min_workers, spec.elastic.max_workers
    if ctx.queueing == "volcano" and spec.gang_min < spec.workers:
        return spec.gang_min, spec.workers
    return spec.workers, spec.workers


def nnodes(low: int, high: int) -> str:
    """torchrun's --nnodes: a fixed count, or MIN:MAX (https://pytorch.org/docs/stable/elastic/run.html)."""
    return str(high) if low == high else f"{low}:{high}"


def training_objects(spec: TrainingJobSpec, ctx: RenderContext, name: str) -> tuple[list[dict], list[str]]:
    """(objects, caveats) for the cluster's queueing system."""
    caveats = _caveats(spec, ctx)
    if ctx.queueing == "volcano":
        return [_volcano_job(spec, ctx, name)], caveats
    return [_headless_service(spec, ctx, name), _kueue_job(spec, ctx, name)], caveats


def _container(spec: TrainingJobSpec, ctx: RenderContext, name: str, worker0: str) -> dict:
    endpoint = f"{worker0}.{name}.{ctx.namespace}.svc.{ctx.cluster_domain}:{RDZV_PORT}"
    low, high = node_range(spec, ctx)
    # At most the job's own workers exist (an elastic max above them is room torchrun never sees filled).
    argv = torchrun_argv(spec, endpoint, name, nnodes(low, high), late_joiners=min(high, spec.workers) - low)
    env = network_env(spec, ctx)
    if spec.elastic:
        env["CHECKPOINT_PATH"] = spec.elastic.checkpoint_path
    env.update(spec.env)
    _, mounts = pvc_volumes(spec.volumes)
    container: dict = {
        "name": "trainer",
        "image": spec.image,
        "command": [kube_literal(arg) for arg in argv],
    }
    if env or spec.secret_env:
        container["env"] = env_list(env, spec.secret_env)
    container["ports"] = [{"name": "rdzv", "containerPort": RDZV_PORT}]
    container["resources"] = container_resources(spec, ctx)
    if (security := security_context(spec, ctx)) is not None:
        container["securityContext"] = security
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

    With Volcano, the NVLink and leaf levels use the Job's networkTopology instead (gang-aware); with Kueue's
    Topology Aware Scheduling (topology_scheduler kueue-tas) every level is the pod-set annotation Kueue places the
    whole gang by (common.tas_annotations), and Kueue's placement ignores pod affinity.
    """
    if spec.topology == Topology.ANY or (volcano and spec.topology != Topology.NODE):
        return None
    if not volcano and ctx.topology_scheduler == "kueue-tas" and spec.sharing.mode not in SHARED_POOLS:
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
    """A Volcano Job: gang of gang_min, the tier's priority, retries on eviction and failure.

    Volcano's webhook turns `maxRetry: 0` into 3 (patchDefaultMaxRetry), so "no retries" is said by having no
    restart policy: without one, a failed pod stays failed and the Job ends Failed.
    """
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
        **({"maxRetry": spec.retries} if spec.retries else {}),
        "plugins": {"svc": []},
        **({"policies": policies} if spec.retries else {}),
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
        tas = ctx.topology_scheduler == "kueue-tas" and spec.sharing.mode not in SHARED_POOLS
        if spec.topology != Topology.ANY and tas:
            out.append(
                f"Topology '{spec.topology}' is Kueue's Topology Aware Scheduling: the pods ask for the level "
                f"{ctx.topology_labels[spec.topology]} of the {spec.gpu_model} Topology, and Kueue admits the gang "
                "only where one domain of that level holds every worker, then gives each pod its node."
            )
        elif spec.topology != Topology.ANY:
            out.append(
                f"Topology '{spec.topology}' is a required pod affinity on {ctx.topology_labels[spec.topology]}: "
                "kube-scheduler places the pods after Kueue admits the quota, without gang awareness. Kueue's "
                "Topology Aware Scheduling does this at admission once the GPU flavor has a Topology "
                "(topology_scheduler: kueue-tas)."
            )
        out.append(
            f"Kueue admits the pods' cpu, memory and GPU requests against the ClusterQueue's ResourceFlavor "
            f"'{sharing_pool(spec)}', the only one whose node labels the pods' node selector matches."
        )
    elif spec.topology in (Topology.NVLINK, Topology.LEAF) and ctx.topology_scheduler == "volcano-hypernodes":
        out.append(
            f"Topology '{spec.topology}' uses the Job's networkTopology (tier {ctx.volcano_tiers[spec.topology]}): "
            "Volcano starts the gang only inside one of the cluster's HyperNodes of that tier or below."
        )
    elif spec.topology in (Topology.NVLINK, Topology.LEAF):
        out.append(
            f"Topology '{spec.topology}' uses the Job's networkTopology (tier {ctx.volcano_tiers[spec.topology]}): "
            "the cluster needs Volcano HyperNodes describing its NVLink domains and leaf switches."
        )
    if ctx.queueing == "volcano" and not spec.elastic and spec.gang_min < spec.workers:
        out.append(
            f"Volcano may start this job with gang_min {spec.gang_min} of its {spec.workers} workers: torchrun "
            f"accepts {spec.gang_min} to {spec.workers} nodes, and restarts the workers from the start of the "
            "program whenever another one joins (set elastic with a checkpoint path to resume instead)."
        )
    if ctx.queueing == "volcano" and spec.gang_min < spec.workers:
        out.append(
            "torchrun's rendezvous is hosted by worker 0: the others wait for it (up to torchrun's join timeout) "
            "if Volcano starts them first."
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
            f"Discovery labels: product '-SHARED', {spec.sharing.replicas} replicas per GPU, sharing-strategy "
            f"time-slicing), the pool '{sharing_pool(spec)}' of the quota objects. Replicas share memory and faults."
        )
    elif mode == Sharing.MPS:
        out.append(
            f"MPS: each worker requests one nvidia.com/gpu replica on an MPS pool (GPU Feature Discovery labels: "
            f"product '-SHARED', {spec.sharing.replicas} replicas per GPU, sharing-strategy mps), the pool "
            f"'{sharing_pool(spec)}' of the quota objects. The device plugin's MPS control daemon caps each replica "
            f"at 1/{spec.sharing.replicas} of the GPU's memory and compute; a fatal fault in one client ends every "
            "client on the GPU, and DCGM-Exporter cannot tell the pods' metrics apart."
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
