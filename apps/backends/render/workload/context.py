"""What the workload renderers take besides the spec, and what they return.

`WorkloadContext` is what the console knows about where one workload runs (from its tables); a backend
adds its cluster's own settings and turns it into the context of its renderer: `kubernetes_context` gives
the `RenderContext` of `render_kubernetes`, `slurm_context` the `SlurmContext` of `render_slurm`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from apps.backends.render.errors import RenderError
from apps.backends.render.names import is_dns_subdomain, is_qualified_name
from apps.backends.render.result import comment_block
from apps.backends.render.workload.network import Fabric

QUEUEINGS = ("kueue", "volcano")
# What a cluster runs inference services and training jobs as (its connection settings `inference_target` and
# `training_target`; docs/targets.md). "deployment": a Deployment, or a LeaderWorkerSet when a replica spans nodes
# (today's behaviour); "lws": always a LeaderWorkerSet; "kserve": a KServe InferenceService. "kueue-job": a batch/v1
# Indexed Job that Kueue admits; "volcano": a Volcano Job; "trainjob": a Kubeflow Trainer TrainJob.
INFERENCE_TARGETS = ("deployment", "lws", "kserve")
TRAINING_TARGETS = ("kueue-job", "volcano", "trainjob")
# The training target each queueing system takes when the setting is absent (what the console rendered before).
DEFAULT_TRAINING_TARGET = {"kueue": "kueue-job", "volcano": "volcano"}
# Which queueing systems each training target works with: a kueue-job is Kueue's, a Volcano Job Volcano's; the
# pinned Trainer API (v1alpha1, 2025-02) has a coscheduling pod-group policy but no Volcano one, so a TrainJob on a
# Volcano cluster would run outside its queues, and it is only offered with Kueue (kubeflow TrainJob integration).
TRAINING_QUEUEING = {"kueue-job": ("kueue",), "volcano": ("volcano",), "trainjob": ("kueue",)}
DEFAULT_TRAINJOB_RUNTIME = "torch-distributed"  # the ClusterTrainingRuntime the Trainer ships for PyTorch
# Node labels that carry each topology level. kubernetes.io/hostname is standard; nvidia.com/gpu.clique is
# what GPU Feature Discovery sets for an NVLink domain; the leaf-switch label is site-specific.
DEFAULT_TOPOLOGY_LABELS = {
    "node": "kubernetes.io/hostname",
    "nvlink": "nvidia.com/gpu.clique",
    "leaf": "gpu-console/leaf-switch",
}
# The levels a cluster's `topology_labels` connection setting may name: the renderer places gangs on "leaf" and
# "nvlink"; "rack" is read by the inventory only. The node level is always kubernetes.io/hostname.
TOPOLOGY_SETTING_LEVELS = ("rack", "leaf", "nvlink")
# Volcano HyperNode tiers (1 is the lowest network level) for jobs that must stay within one domain; a cluster's
# `volcano_tiers` setting overrides them.
DEFAULT_VOLCANO_TIERS = {"nvlink": 1, "leaf": 2}
# Who keeps a gang within its topology level (the connection setting `topology_scheduler`, docs/targets.md):
# "console": the console's own pod affinity (and, on Volcano, the Job's networkTopology), as before the setting;
# "kueue-tas": Kueue's Topology Aware Scheduling (a Topology per GPU model, the pod-set annotations);
# "volcano-hypernodes": Volcano's network-topology-aware scheduling over the cluster's HyperNodes, which the
# inventory reads as the nodes' leaf switches and NVLink domains.
TOPOLOGY_SCHEDULERS = ("console", "kueue-tas", "volcano-hypernodes")
SCHEDULER_QUEUEING = {"kueue-tas": "kueue", "volcano-hypernodes": "volcano"}


@dataclass(frozen=True)
class WorkloadContext:
    """Where one workload runs, in the console's terms: what its tables say about it on its cluster.

    The workloads app builds it (`apps.workloads.rendering.render_context`) from the queue's binding on the
    cluster, the tier, the GPU model and its node pool, and passes it with the typed spec to the backend,
    which adds its own settings (Kubernetes: queueing and node size; Slurm: partition, GRES names, output
    directory) and renders. The workload page and the submission both go through `Backend.render`, so what
    the page shows is what the cluster gets.
    """

    name: str  # the backend's name for this run (unique per cluster): the object or job name
    workload_id: str  # the console's id, on every object and pod as a label
    queue: str  # "<tenant>-<queue>": the Kueue LocalQueue or Volcano leaf queue
    tier: str  # PriorityClass and Kueue WorkloadPriorityClass; the Slurm QOS
    preemptible: bool = True
    gpu_model: str = ""  # the console's GPU model code (Slurm maps it to its GRES type)
    product_label: str = ""  # the node pool's nvidia.com/gpu.product
    namespace: str = ""  # Kubernetes: the queue's first namespace bound on the cluster
    tolerations: list[dict] = field(default_factory=list)  # the node pool's taints as {key, value, effect}
    slurm_account: str = ""  # Slurm: the queue's account on the cluster
    # Kubernetes: the model's GPU pools the inventory shows (render/pools.py names, e.g. "l40s-shared-4",
    # "a100-hami") and the MIG resources of its nodes ("nvidia.com/mig-1g.10gb"); None: not known, not checked
    gpu_pools: tuple[str, ...] | None = None
    # Kubernetes with topology_scheduler kueue-tas: the node labels of the levels of the model's Kueue Topology
    # (render/topology.py, from the inventory); None: not known, not checked
    topology_levels: tuple[str, ...] | None = None
    # The node pool's fabric (network.py): what the spec's `network` resolves against; None: no pool
    fabric: Fabric | None = None


def topology_label_errors(value: object) -> list[str]:
    """What is wrong with a `topology_labels` connection setting ({level: node label key}), as
    "topology_labels.<level>: ..." messages; [] when it is absent or valid."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return [f"topology_labels: must be an object of level: node label key, not {type(value).__name__}"]
    errors = []
    for level, label in value.items():
        if level not in TOPOLOGY_SETTING_LEVELS:
            errors.append(
                f"topology_labels.{level}: not a topology level; levels: {', '.join(TOPOLOGY_SETTING_LEVELS)}"
            )
        elif not isinstance(label, str) or not is_qualified_name(label):
            errors.append(
                f"topology_labels.{level}: {label!r} is not a node label key ([prefix/]name: a DNS subdomain prefix, "
                "a name of at most 63 letters, digits, '-', '_' and '.')"
            )
    return errors


def topology_labels(connection: dict) -> dict[str, str]:
    """The node label of each topology level on a cluster: the defaults, with the `topology_labels` setting's
    leaf and NVLink labels (RenderError naming the setting when it is not valid)."""
    setting = connection.get("topology_labels")
    errors = topology_label_errors(setting)
    if errors:
        field, _, message = errors[0].partition(": ")
        raise RenderError(f"connection.{field}", message)
    labels = dict(DEFAULT_TOPOLOGY_LABELS)
    labels.update({level: label for level, label in (setting or {}).items() if level in labels})
    return labels


def topology_scheduler_errors(connection: dict) -> list[str]:
    """What is wrong with a cluster's `topology_scheduler` and `volcano_tiers` settings, as "<setting>: ..."
    messages; [] when they are absent (the console places gangs itself) or valid."""
    errors = []
    scheduler = connection.get("topology_scheduler")
    queueing = connection.get("queueing", "kueue")
    if scheduler is not None and scheduler not in TOPOLOGY_SCHEDULERS:
        errors.append(f"topology_scheduler: {scheduler!r} is not one of {', '.join(TOPOLOGY_SCHEDULERS)}")
    elif scheduler in SCHEDULER_QUEUEING and queueing in QUEUEINGS and queueing != SCHEDULER_QUEUEING[scheduler]:
        needs = {"kueue-tas": "Kueue's Topology Aware Scheduling", "volcano-hypernodes": "Volcano's HyperNodes"}
        errors.append(
            f"topology_scheduler: {scheduler!r} needs queueing {SCHEDULER_QUEUEING[scheduler]!r} "
            f"({needs[scheduler]}), but this cluster's queueing is {queueing!r}"
        )
    elif scheduler == "kueue-tas" and connection.get("training_target") == "trainjob":
        errors.append(
            "topology_scheduler: 'kueue-tas' does not work with training_target 'trainjob': the pinned Kubeflow "
            "Trainer API's podSpecOverrides carry no scheduling gates, so Kueue cannot put a TrainJob's pods on "
            "the nodes its topology assignment names"
        )
    tiers = connection.get("volcano_tiers")
    if tiers is None:
        return errors
    if queueing != "volcano":
        errors.append(f"volcano_tiers: HyperNode tiers are Volcano's, and this cluster's queueing is {queueing!r}")
    elif not isinstance(tiers, dict):
        errors.append(f"volcano_tiers: must be an object of level: HyperNode tier, not {type(tiers).__name__}")
    else:
        for level, tier in tiers.items():
            if level not in DEFAULT_VOLCANO_TIERS:
                errors.append(f"volcano_tiers.{level}: not a level; levels: {', '.join(DEFAULT_VOLCANO_TIERS)}")
            elif not isinstance(tier, int) or isinstance(tier, bool) or tier < 1:
                errors.append(f"volcano_tiers.{level}: {tier!r} is not a HyperNode tier (a whole number from 1)")
        merged = volcano_tiers({"volcano_tiers": tiers}, checked=False)
        if not errors and merged["nvlink"] > merged["leaf"]:
            errors.append(
                f"volcano_tiers.nvlink: tier {merged['nvlink']} is above the leaf tier {merged['leaf']}: an NVLink "
                "domain sits inside a leaf switch's HyperNode"
            )
    return errors


def volcano_tiers(connection: dict, *, checked: bool = True) -> dict[str, int]:
    """The HyperNode tier of each level on a cluster: the defaults, with the `volcano_tiers` setting's."""
    tiers = dict(DEFAULT_VOLCANO_TIERS)
    setting = connection.get("volcano_tiers")
    if isinstance(setting, dict):
        tiers.update({k: v for k, v in setting.items() if k in tiers and (not checked or isinstance(v, int))})
    return tiers


def topology_scheduler(connection: dict) -> str:
    """The cluster's topology scheduler (RenderError naming the setting when it is not valid)."""
    errors = topology_scheduler_errors(connection)
    if errors:
        field, _, message = errors[0].partition(": ")
        raise RenderError(f"connection.{field}", message)
    return connection.get("topology_scheduler") or "console"


def target_errors(connection: dict) -> list[str]:
    """What is wrong with a cluster's `inference_target`, `training_target` and `trainjob_runtime` settings, as
    "<setting>: ..." messages; [] when they are absent (the defaults) or valid."""
    errors = []
    inference = connection.get("inference_target")
    if inference is not None and inference not in INFERENCE_TARGETS:
        errors.append(f"inference_target: {inference!r} is not one of {', '.join(INFERENCE_TARGETS)}")
    training = connection.get("training_target")
    queueing = connection.get("queueing", "kueue")
    if training is not None and training not in TRAINING_TARGETS:
        errors.append(f"training_target: {training!r} is not one of {', '.join(TRAINING_TARGETS)}")
    elif training is not None and queueing in QUEUEINGS and queueing not in TRAINING_QUEUEING[training]:
        why = {
            "kueue-job": "a suspended Job waits for Kueue, which this cluster's queueing does not name",
            "volcano": "a Volcano Job needs Volcano's scheduler and queues",
            "trainjob": "the pinned Kubeflow Trainer API has no Volcano pod-group policy, so its pods would bypass "
            "Volcano's queues; use training_target volcano",
        }[training]
        errors.append(f"training_target: {training!r} does not work with queueing {queueing!r}: {why}")
    runtime = connection.get("trainjob_runtime")
    if runtime is not None and (not isinstance(runtime, str) or not is_dns_subdomain(runtime)):
        errors.append(f"trainjob_runtime: {runtime!r} is not a ClusterTrainingRuntime name (a DNS subdomain)")
    return errors


def targets(connection: dict) -> tuple[str, str, str]:
    """(inference target, training target, TrainJob runtime) of a cluster: its settings, else the defaults that keep
    what it ran before (RenderError naming the setting when one is not valid)."""
    errors = target_errors(connection)
    if errors:
        field, _, message = errors[0].partition(": ")
        raise RenderError(f"connection.{field}", message)
    queueing = connection.get("queueing", "kueue")
    return (
        connection.get("inference_target") or "deployment",
        connection.get("training_target") or DEFAULT_TRAINING_TARGET.get(queueing, "kueue-job"),
        connection.get("trainjob_runtime") or DEFAULT_TRAINJOB_RUNTIME,
    )


def kubernetes_context(context: WorkloadContext, connection: dict) -> RenderContext:
    """The Kubernetes renderer's context on a cluster with these connection settings (`queueing`, default
    kueue; `gpus_per_node`, default 8; `topology_labels`, the node labels of the leaf switch and NVLink domain,
    defaults in DEFAULT_TOPOLOGY_LABELS; the GPU-sharing setup: `hami_node_labels`, `volcano_vgpu`,
    `volcano_per_model_resources`, as the quota renderer reads them, see desired.QuotaSettings; the deployment
    targets `inference_target`, `training_target` and `trainjob_runtime`, see `targets`; the prefixes its Kueue
    leaves out of quota, `kueue_excluded_resources`, which must hold a pool's RDMA resource for RDMA workloads)."""
    hami_labels = connection.get("hami_node_labels") or {}
    excluded = connection.get("kueue_excluded_resources") or ()
    inference_target, training_target, trainjob_runtime = targets(connection)
    return RenderContext(
        namespace=context.namespace,
        queue_name=context.queue,
        priority_class=context.tier,
        queueing=connection.get("queueing", "kueue"),
        workload_id=context.workload_id,
        product_label=context.product_label,
        tolerations=list(context.tolerations),
        gpus_per_node=int(connection.get("gpus_per_node", 8)),
        preemptible=context.preemptible,
        name=context.name,
        topology_labels=topology_labels(connection),
        topology_scheduler=topology_scheduler(connection),
        topology_levels=context.topology_levels,
        volcano_tiers=volcano_tiers(connection),
        hami_node_labels=dict(hami_labels) if isinstance(hami_labels, dict) else {"": str(hami_labels)},
        volcano_vgpu=bool(connection.get("volcano_vgpu", False)),
        per_model_gpu_resources=bool(connection.get("volcano_per_model_resources", False)),
        gpu_pools=context.gpu_pools,
        inference_target=inference_target,
        training_target=training_target,
        trainjob_runtime=trainjob_runtime,
        fabric=context.fabric,
        kueue_excluded_resources=tuple(str(p) for p in excluded) if isinstance(excluded, list | tuple) else (),
    )


def slurm_context(
    context: WorkloadContext,
    *,
    partition: str,
    gres_type: str,
    output_dir: str,
    containers: str = "",
    volume_dirs: dict[str, str] | None = None,
    secrets_dir: str = "",
) -> SlurmContext:
    """The Slurm renderer's context: the queue's account, the tier's QOS, and the cluster's partition, GRES type
    of the workload's GPU model, output directory and container runtime (with its volume directories)."""
    return SlurmContext(
        account=context.slurm_account,
        qos=context.tier,
        partition=partition,
        gres_type=gres_type,
        output_dir=output_dir,
        job_name=context.name,
        containers=containers,
        volume_dirs=dict(volume_dirs or {}),
        secrets_dir=secrets_dir,
        fabric=context.fabric,
    )


@dataclass(frozen=True)
class RenderContext:
    """Where and how a workload runs on one Kubernetes cluster.

    `queue_name` is the Kueue LocalQueue or the Volcano leaf queue; `priority_class` the tier name (the
    quota renderer creates a PriorityClass and a Kueue WorkloadPriorityClass of that name);
    `product_label` the node pool's `nvidia.com/gpu.product`; `tolerations` the pool's taints as
    {key, value, effect} dicts. `name` overrides the object name (default: the spec's name), for a console
    that keeps names unique per namespace. `gpu_resource` overrides the GPU extended resource: by default
    the stock nvidia.com/gpu, and with Volcano on a site that renames it per model
    (`per_model_gpu_resources`) nvidia.com/gpu-<model>. With Volcano `queue_name` is the queue's
    "<tenant>-<queue>": its workloads name the leaf of their GPU pool, "<tenant>-<queue>-<pool>" (volcano.py).
    `hami_node_labels` are the labels of the nodes HAMi's device plugin runs on (Kueue: a HAMi pod selects
    them, as its pool's ResourceFlavor does); `volcano_vgpu` says Volcano's vGPU device plugin runs.
    `gpu_pools`, when known, are the model's pools and MIG resources on the cluster: a time-slice, MPS, MIG or HAMi
    workload whose pool is not among them is refused (no quota object covers it, no node would run it).
    `topology_labels` are the node labels of each topology level (the cluster's `topology_labels` setting):
    a gang kept on one leaf switch or NVLink domain has a required pod affinity on that label, unless the
    cluster's `topology_scheduler` hands that to Kueue's TAS (the pod-set annotation names the label) or to
    Volcano's HyperNodes (the Job's networkTopology, at the level's tier of `volcano_tiers`).
    `inference_target` / `training_target` say what a service or a job becomes (INFERENCE_TARGETS, TRAINING_TARGETS;
    "" for a training job: the queueing system's own, DEFAULT_TRAINING_TARGET); `trainjob_runtime` is the
    ClusterTrainingRuntime a TrainJob names. `fabric` is the node pool's (network.py) and
    `kueue_excluded_resources` the prefixes the cluster's Kueue leaves out of quota: a pod's RDMA resource must be
    among them, or Kueue would never admit it (its ClusterQueues do not cover it).
    """

    namespace: str
    queue_name: str
    priority_class: str
    queueing: str
    workload_id: str | int
    product_label: str
    tolerations: list[dict] = field(default_factory=list)
    gpus_per_node: int = 8
    preemptible: bool = True  # False: Volcano pods carry volcano.sh/preemptable: "false"
    name: str = ""
    gpu_resource: str = ""
    cluster_domain: str = "cluster.local"
    topology_labels: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_TOPOLOGY_LABELS))
    volcano_tiers: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_VOLCANO_TIERS))
    topology_scheduler: str = "console"  # TOPOLOGY_SCHEDULERS
    topology_levels: tuple[str, ...] | None = None  # see WorkloadContext
    hami_node_labels: dict[str, str] = field(default_factory=dict)
    volcano_vgpu: bool = False
    per_model_gpu_resources: bool = False
    gpu_pools: tuple[str, ...] | None = None  # see WorkloadContext; a sharing mode outside them is refused
    inference_target: str = "deployment"
    training_target: str = ""
    trainjob_runtime: str = DEFAULT_TRAINJOB_RUNTIME
    fabric: Fabric | None = None
    kueue_excluded_resources: tuple[str, ...] = ()

    @property
    def training(self) -> str:
        """The training target in effect: the setting, else the queueing system's own."""
        return self.training_target or DEFAULT_TRAINING_TARGET.get(self.queueing, "kueue-job")


class _Dumper(yaml.SafeDumper):
    """Block sequences indented under their key (as kubectl prints them); scripts as literal blocks."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    def ignore_aliases(self, data: object) -> bool:
        return True  # a manifest spells everything out; no &anchors


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # Multi-line strings (the leader script, the drain hook) read best as | blocks; PyYAML falls back to a
    # quoted style by itself when a block cannot hold the string exactly (e.g. trailing spaces).
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


@dataclass
class RenderedWorkload:
    """Objects for server-side apply, in apply order, with what the cluster setup must provide."""

    objects: list[dict]
    caveats: list[str] = field(default_factory=list)
    endpoint: str = ""  # inference: the in-cluster URL of the OpenAI-compatible API

    @property
    def text(self) -> str:
        """What the workload page shows: the YAML with its caveats."""
        return self.to_yaml()

    def to_yaml(self, *, with_caveats: bool = True) -> str:
        """Multi-document YAML, caveats first as comments (the form of the quota renderer's previews)."""
        head = ""
        if with_caveats and self.caveats:
            head = "# Caveats: what the cluster must provide, and what it cannot express\n" + comment_block(
                self.caveats
            )
        body = yaml.dump_all(
            self.objects,
            Dumper=_Dumper,
            sort_keys=False,
            default_flow_style=False,
            explicit_start=True,
            width=1000,  # never fold long strings: keeps output byte-stable and grep-able
            allow_unicode=True,
        )
        return head + body


@dataclass(frozen=True)
class SlurmContext:
    """Where a workload runs on one Slurm cluster.

    account, qos and partition go into `#SBATCH` lines and are therefore restricted to [a-z0-9_-] (not
    starting with '-'); `gres_type` is the GPU GRES type (e.g. "a100"); `output_dir` an absolute path for
    the job's output file. `mig_gres_type` names the GRES type of MIG instances when the site's differs
    from Slurm's AutoDetect naming "<gres_type>_<profile>".

    `containers` is how the cluster runs a spec's image: "pyxis" (the NVIDIA pyxis SPANK plugin with enroot:
    `srun --container-image`), "none" (the site runs jobs on the nodes' own software: the image is not
    used, and the script says so) or "" (not configured: a spec with an image is refused, never run without
    it). `volume_dirs` maps a volume's claim to the directory on the cluster's shared file system that
    pyxis bind-mounts at the volume's mount path. `secrets_dir` is where the compute nodes keep secrets as
    `<secret>/<key>` files, for a spec's `secret_env` (empty: the cluster has none, and such a spec is refused).
    `fabric` is the node pool's (network.py): the NCCL environment and the fabric's GRES of a job that spans nodes.
    """

    account: str
    qos: str
    partition: str
    gres_type: str
    output_dir: str
    job_name: str = ""  # default: the spec's name
    mig_gres_type: str = ""
    rdzv_port: int = 29500
    containers: str = ""
    volume_dirs: dict[str, str] = field(default_factory=dict)
    secrets_dir: str = ""
    fabric: Fabric | None = None


@dataclass
class RenderedScript:
    """An sbatch script (submit it as the script file or on sbatch's stdin) and its main command.

    `argv_preview` is the argument vector of the job's main step as the script runs it, with the Slurm
    variables it expands left as "$NAME" (for the UI; the script is what runs).
    """

    script: str
    argv_preview: list[str]
    caveats: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """What the workload page shows: the script (its caveats are comments in it)."""
        return self.script
