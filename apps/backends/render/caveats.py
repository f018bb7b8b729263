"""What each backend cannot express of the console's quota model, in words for a platform admin.

These are the fixed caveats; renderers add state-specific ones (collapsed weights, skipped queues)
after them. They are English in rendered output and logs; `caveats_for` gives them in the active language
(marked with gettext_noop here). The cluster page shows `caveats_for(kind, queueing)` without rendering anything.
Facts come from shared/reference/queues-quotas-priorities.md (sections 1, 2, 3, 5, 6 and 7).
"""

from __future__ import annotations


def gettext_noop(text: str) -> str:
    """Marks a caveat for makemessages (which looks for this name); the renderers import no Django."""
    return text


def _in_active_language(texts: list[str]) -> list[str]:
    from django.conf import settings

    if not settings.configured:
        return list(texts)
    from django.utils.translation import gettext

    return [gettext(text) for text in texts]


KUBERNETES = [
    gettext_noop(
        "ResourceQuota rejects a pod that exceeds it with 403 at creation; it never queues. The console "
        "renders one per bound namespace only as a backstop at the queue's maximum (guarantee + borrow "
        "limit), on the GPU resource with the requests. prefix (the only form extended resources accept); "
        "queueing is the job of Kueue or Volcano."
    ),
    gettext_noop(
        "ResourceQuota is per namespace: a queue bound to several namespaces gets the queue's whole maximum "
        "in each of them. Its requests.nvidia.com/gpu counts a model's GPUs in the units of its pool with the "
        "most per GPU (time-slice or MPS replicas, HAMi vGPUs), so it never refuses what the queue may hold. An "
        "unlimited borrow limit has no quota: the namespace then gets no ResourceQuota (with Volcano's "
        "per-model resource names, that model's entry is left out)."
    ),
    gettext_noop(
        "PriorityClass preemptionPolicy: Never (rendered for non-preemptible tiers) only stops those pods "
        "from preempting others in kube-scheduler; it does not protect them from being preempted."
    ),
    gettext_noop("A per-user cap (per_user_limit) has no Kubernetes object; the console's admission enforces it."),
]

KUEUE = [
    gettext_noop(
        "Kueue has no per-workload non-preemptible flag, and a tier that never borrows cannot be expressed "
        "(borrowingLimit is per ClusterQueue). The console enforces both at admission: it submits a "
        "non-preemptible, non-borrowing tier's workload only when it fits within the ClusterQueue's "
        "nominalQuota (its guarantee), and gives that tier the highest WorkloadPriorityClass. Kueue itself "
        "would still let reclaimWithinCohort evict such a workload if its ClusterQueue were above nominal "
        "after every lower-priority workload had gone."
    ),
    gettext_noop(
        "borrowingLimit and lendingLimit must be null without a cohortName; every ClusterQueue is placed in "
        "its tenant's Cohort, so both limits can be rendered."
    ),
    gettext_noop(
        "Cohorts mirror the tenant tree under one root Cohort (gpu-console-root), so organizations lend "
        "to each other as the console's admission does; quota is borrowed nearest first only in the "
        "console's own decisions, Kueue borrows from the whole cohort tree."
    ),
    gettext_noop(
        "preemption.borrowWithinCohort.maxPriorityThreshold is set just below the lowest non-preemptible "
        "tier: a borrowing workload preempts only workloads of preemptible tiers. withinClusterQueue "
        "LowerPriority would still evict a non-preemptible tier if a higher-valued tier existed."
    ),
    gettext_noop(
        "fairSharing.weight acts only when Kueue's Configuration enables fairSharing, and only on borrowed "
        "capacity; hierarchical cohorts with fair sharing have known over-preemption issues "
        "(kueue#3779, kueue#10131)."
    ),
    gettext_noop(
        "Quota is aggregate per ClusterQueue: without Topology Aware Scheduling an 8-GPU pod can be admitted "
        "on 4 + 4 free GPUs on two nodes and then never schedule (kueue#4329)."
    ),
    gettext_noop(
        "Workloads must carry kueue.x-k8s.io/queue-name and kueue.x-k8s.io/priority-class labels and select "
        "their GPU model (nodeSelector nvidia.com/gpu.product); a missing WorkloadPriorityClass creates no "
        "Workload at all, and an unpinned workload gets the first flavor with free quota."
    ),
    gettext_noop(
        "With Kueue's default configuration a workload requesting a resource its ClusterQueue does not cover "
        "is never admitted, so ClusterQueues cover cpu, memory and every GPU resource of their pools: a "
        "ResourceFlavor per pool (the model's nodes, its time-sliced and its MPS nodes per replica count, its "
        "HAMi nodes; MIG instances of the device plugin's mixed strategy in the model's flavor). cpu and memory "
        "quotas are the queue's GPUs times what the pool's nodes have per GPU (8 cores and 64 GiB without "
        "inventory). A site whose Kueue excludes resources (resources.excludeResourcePrefixes) lists the same "
        "prefixes in the cluster's kueue_excluded_resources."
    ),
    gettext_noop(
        "Each pool's flavor holds the queue's whole quota of the model in that pool's units (replicas, vGPUs, "
        "MIG instances per GPU): Kueue does not see that the pools share one guarantee. The console's "
        "admission, which counts each workload's share of a GPU, keeps the queue within it."
    ),
]

VOLCANO = [
    gettext_noop(
        "Volcano has no GPU-model flavor object: the queue tree has a subtree per GPU pool under root (the "
        "pool's queue, then '<tenant>-<pool>' queues, then leaves '<tenant>-<queue>-<pool>'). Workloads name "
        "their pool's leaf and request the stock nvidia.com/gpu with the pool's node selector, so borrowing and "
        "reclaim stay among one pool's jobs. Sites whose device plugin advertises nvidia.com/gpu-<model code> "
        "set volcano_per_model_resources."
    ),
    gettext_noop(
        "Queues are rendered for the capacity plugin with enableHierarchy: true (deserved = guarantee, "
        "guarantee.resource = the part never lent, capability = guarantee + borrow limit, parent = the tenant "
        "tree). The capacity and proportion plugins cannot be enabled together, the capacity plugin ignores "
        "weight, and 'reclaim' must be in the scheduler's actions."
    ),
    gettext_noop(
        "A capacity-plugin queue reclaims only if every resource a job requests appears in its deserved "
        "(volcano#4658): deserved covers cpu and memory (the queue's GPUs times what the pool's nodes have per "
        "GPU, 8 cores and 64 GiB without inventory) and the pool's GPU resources."
    ),
    gettext_noop(
        "An unlimited borrow limit is rendered as capability = the cluster's total guarantee in that pool "
        "(everything that could ever be lent), because Volcano's webhook requires capability >= deserved in "
        "every dimension once any dimension is capped. Tenant and pool queues get the sums of their children."
    ),
    gettext_noop(
        "Volcano weights are integers 1..65535: the console's weight is multiplied by 100 and rounded "
        "(a weight of 0, 'never borrow by fair share', becomes the minimum 1)."
    ),
    gettext_noop(
        "Non-preemptible tiers are expressed on the workload, not the queue: their pods carry the "
        'annotation volcano.sh/preemptable: "false". A tier that never borrows cannot be expressed; the '
        "console's admission enforces it."
    ),
    gettext_noop(
        "Known Volcano limits: hierarchical queues can prevent reclaim (volcano#4817); enqueue blocks when "
        "the cluster is full so reclaim never fires (volcano#4679); jobs can only target leaf queues."
    ),
]

SLURM = [
    gettext_noop(
        "Slurm has no lend limit: a queue's unused GPUs are shared by fair share and preemption, never "
        "reserved (the part of a guarantee that Kueue keeps with lendingLimit is not expressible)."
    ),
    gettext_noop(
        "Slurm has no guarantee: GrpTRES is only a cap (guarantee + borrow limit). The guarantee is "
        "approximated by fairshare (guaranteed GPUs x weight) and by QOS preemption."
    ),
    SLURM_ENFORCE := gettext_noop(
        "Limits are enforced only with AccountingStorageEnforce=limits (or safe) in slurm.conf; a job over "
        "GrpTRES pends with reason AssocGrpGRES rather than being rejected."
    ),
    SLURM_TRES := gettext_noop(
        "AccountingStorageTRES must list gres/gpu and gres/gpu:<type> for every GPU type, or GPUs are "
        "neither limited nor accounted."
    ),
    gettext_noop(
        "QOS Priority counts only with priority/multifactor and a non-zero PriorityWeightQOS, and it is "
        "unrelated to preemption: only the Preempt lists are (PreemptType=preempt/qos). Non-preemptible tiers "
        "appear in no Preempt list."
    ),
    gettext_noop(
        "PreemptMode=REQUEUE needs JobRequeue=1 or sbatch --requeue. SUSPEND is not used because a "
        "suspended job keeps its GPUs (GRES is not released)."
    ),
    gettext_noop(
        "A tier that never borrows cannot be expressed (Slurm has no borrowing, only the GrpTRES cap); the "
        "console's admission enforces it."
    ),
    gettext_noop(
        "Typed GPU caps (gres/gpu:<type>) are reliable only for jobs that request a GPU type, as the "
        "console's submissions do; the untyped total gres/gpu is capped too when every model of the queue is."
    ),
    gettext_noop("When backfill preempts it may preempt more jobs than needed."),
]


def slurm_config_caveats() -> list[str]:
    """The Slurm caveats about slurm.conf settings, in the active language: a push to a live cluster checks
    those settings (`scontrol show config`) and says what is actually missing instead."""
    return _in_active_language([SLURM_ENFORCE, SLURM_TRES])


def caveats_for(kind: str, queueing: str = "kueue") -> list[str]:
    """The fixed caveats for a backend kind ("kubernetes" or "slurm") and, for Kubernetes, its queueing."""
    if kind == "slurm":
        return _in_active_language(SLURM)
    if kind == "kubernetes":
        if queueing == "kueue":
            return _in_active_language(KUBERNETES + KUEUE)
        if queueing == "volcano":
            return _in_active_language(KUBERNETES + VOLCANO)
        raise ValueError(f"queueing: {queueing!r} is not one of 'kueue', 'volcano'")
    raise ValueError(f"kind: {kind!r} is not one of 'kubernetes', 'slurm'")
