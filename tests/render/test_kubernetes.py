"""What the Kubernetes renderer says, object by object: Kueue, Volcano and the built-ins they share."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apps.backends.render import RenderError, render_kubernetes, render_slurm
from apps.backends.render.desired import GpuModelRef, QueueSpec, QuotaLine, TenantSpec, TierSpec
from apps.backends.render.kueue import ROOT_COHORT
from apps.backends.render.validate import validate_objects
from tests.render.states import QUEUES, representative_state, with_queues


def find(objects: list[dict], kind: str, name: str, namespace: str | None = None) -> dict:
    matches = [
        o
        for o in objects
        if o["kind"] == kind and o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace
    ]
    assert len(matches) == 1, f"{kind} {namespace}/{name}: {len(matches)} found"
    return matches[0]


def kinds(objects: list[dict]) -> list[str]:
    return [o["kind"] for o in objects]


@pytest.fixture(scope="module")
def kueue() -> list[dict]:
    return render_kubernetes(representative_state("kueue")).objects


@pytest.fixture(scope="module")
def volcano() -> list[dict]:
    return render_kubernetes(representative_state("volcano")).objects


# --- built-ins ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
def test_priority_class_per_tier(queueing):
    objects = render_kubernetes(representative_state(queueing)).objects
    pcs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PriorityClass"}
    assert {n: (o["value"], o["preemptionPolicy"]) for n, o in pcs.items()} == {
        "online-inference": (1000, "Never"),
        "periodic": (800, "PreemptLowerPriority"),
        "training": (500, "PreemptLowerPriority"),
        "exploratory": (100, "PreemptLowerPriority"),
    }
    assert pcs["online-inference"]["description"] == "Serving; never preempted"


def test_namespaces_carry_tenant_and_queue_labels(kueue):
    ns = find(kueue, "Namespace", "nerf-dev")
    assert ns["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpu-console",
        "gpu-console/tenant": "nerf",
        "gpu-console/queue": "exp",
    }
    assert [o["metadata"]["name"] for o in kueue if o["kind"] == "Namespace"] == [
        "serving-prod",
        "nlp",
        "vision-train",
        "nerf-batch",
        "nerf-dev",
    ]


def test_kueue_resource_quota_is_the_summed_maximum_and_absent_when_unlimited(kueue):
    assert find(kueue, "ResourceQuota", "gpu-console-gpus", "nlp")["spec"]["hard"] == {"requests.nvidia.com/gpu": "8"}
    # serving/online: h100 8 + 0, and l40s 16 + 0 counted in its time-sliced pool's replicas (4 per GPU), the
    # most nvidia.com/gpu an L40S stands for here: the backstop never refuses what the queue may hold
    hard = find(kueue, "ResourceQuota", "gpu-console-gpus", "serving-prod")["spec"]["hard"]
    assert hard == {"requests.nvidia.com/gpu": "72"}
    # vision/train borrows a100 without limit: no quota at all
    assert not [o for o in kueue if o["kind"] == "ResourceQuota" and o["metadata"]["namespace"] == "vision-train"]


def test_volcano_resource_quota_in_the_stock_gpu_resource(volcano):
    assert find(volcano, "ResourceQuota", "gpu-console-gpus", "nlp")["spec"]["hard"] == {"requests.nvidia.com/gpu": "8"}
    assert not [o for o in volcano if o["kind"] == "ResourceQuota" and o["metadata"]["namespace"] == "vision-train"]


def test_volcano_resource_quota_per_model_where_the_site_renames_resources():
    state = representative_state("volcano")
    state = replace(state, settings=replace(state.settings, volcano_per_model_resources=True))
    hard = find(render_kubernetes(state).objects, "ResourceQuota", "gpu-console-gpus", "vision-train")["spec"]["hard"]
    # h100 16 + 8; a100 unlimited (no entry); l40s not in the queue's quota; plain nvidia.com/gpu closed
    assert hard == {
        "requests.nvidia.com/gpu": "0",
        "requests.nvidia.com/gpu-h100": "24",
        "requests.nvidia.com/gpu-l40s": "0",
    }


# --- Kueue -------------------------------------------------------------------------------------------------


def test_resource_flavor_per_gpu_pool(kueue):
    flavors = [o for o in kueue if o["kind"] == "ResourceFlavor"]
    assert [(f["metadata"]["name"], f["spec"]["nodeLabels"]) for f in flavors] == [
        ("h100", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
        ("a100", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
        ("a100-hami", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "gpu": "on"}),
        ("l40s", {"nvidia.com/gpu.product": "NVIDIA-L40S"}),
        (
            "l40s-shared-4",
            {
                "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED",
                "nvidia.com/gpu.replicas": "4",
                "nvidia.com/gpu.sharing-strategy": "time-slicing",
            },
        ),
        (
            "l40s-mps-4",
            {
                "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED",
                "nvidia.com/gpu.replicas": "4",
                "nvidia.com/gpu.sharing-strategy": "mps",
            },
        ),
    ]


def test_cohort_tree_mirrors_the_tenant_tree_under_one_root(kueue):
    parents = {o["metadata"]["name"]: o["spec"].get("parentName") for o in kueue if o["kind"] == "Cohort"}
    assert parents == {
        ROOT_COHORT: None,
        "research": ROOT_COHORT,
        "product": ROOT_COHORT,
        "vision": "research",
        "vision-3d": "vision",
        "nerf": "vision-3d",
        "nlp": "research",
        "serving": "product",
    }
    assert find(kueue, "Cohort", "research")["spec"]["fairSharing"] == {"weight": 2}
    assert find(kueue, "Cohort", "nerf")["spec"]["fairSharing"] == {"weight": "1.5"}


def test_cluster_queue_quotas_per_flavor(kueue):
    cq = find(kueue, "ClusterQueue", "nlp-finetune")
    assert cq["spec"]["cohortName"] == "nlp"
    assert cq["spec"]["namespaceSelector"] == {
        "matchLabels": {"gpu-console/tenant": "nlp", "gpu-console/queue": "finetune"}
    }
    [group] = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    # 8 H100 of nodes with 192 cores and 1536 GiB per 8 GPUs: 24 cores and 192 GiB come with each GPU
    assert group["flavors"] == [
        {
            "name": "h100",
            "resources": [
                {"name": "cpu", "nominalQuota": 192, "borrowingLimit": 0, "lendingLimit": 0},
                {"name": "memory", "nominalQuota": "1536Gi", "borrowingLimit": 0, "lendingLimit": 0},
                {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 0, "lendingLimit": 0},
            ],
        }
    ]
    # None borrow/lend limits are omitted: unlimited borrowing, lend everything
    vision = find(kueue, "ClusterQueue", "vision-train")["spec"]["resourceGroups"][0]
    a100 = next(f for f in vision["flavors"] if f["name"] == "a100")
    assert {r["name"]: r for r in a100["resources"]}["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": 8}


def test_cluster_queue_selects_exactly_its_namespaces(kueue):
    for cq in (o for o in kueue if o["kind"] == "ClusterQueue"):
        selector = cq["spec"]["namespaceSelector"]["matchLabels"]
        selected = sorted(
            o["metadata"]["name"]
            for o in kueue
            if o["kind"] == "Namespace" and selector.items() <= o["metadata"]["labels"].items()
        )
        local_queues = sorted(
            o["metadata"]["namespace"]
            for o in kueue
            if o["kind"] == "LocalQueue" and o["spec"]["clusterQueue"] == cq["metadata"]["name"]
        )
        assert selected == local_queues != []


def test_preemption_reflects_tiers(kueue):
    for cq in (o for o in kueue if o["kind"] == "ClusterQueue"):
        assert cq["spec"]["preemption"] == {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            # just below online-inference (1000), the lowest non-preemptible tier
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 999},
        }


def test_without_non_preemptible_tiers_borrowing_preempts_any_lower_priority():
    state = representative_state("kueue")
    state = replace(state, tiers=tuple(replace(t, preemptible=True) for t in state.tiers))
    cq = next(o for o in render_kubernetes(state).objects if o["kind"] == "ClusterQueue")
    assert cq["spec"]["preemption"]["borrowWithinCohort"] == {"policy": "LowerPriority"}


def test_fair_sharing_weight_collapses_per_model_weights(kueue):
    assert find(kueue, "ClusterQueue", "nerf-exp")["spec"]["fairSharing"] == {"weight": "1.333"}
    assert find(kueue, "ClusterQueue", "nlp-finetune")["spec"]["fairSharing"] == {"weight": 1}


def test_local_queue_per_bound_namespace(kueue):
    lqs = [
        (o["metadata"]["namespace"], o["metadata"]["name"], o["spec"]["clusterQueue"])
        for o in kueue
        if o["kind"] == "LocalQueue"
    ]
    # Named like the ClusterQueue: the workloads' kueue.x-k8s.io/queue-name label names a LocalQueue of their
    # namespace (https://kueue.sigs.k8s.io/docs/concepts/local_queue/), and it carries the ClusterQueue's name.
    assert sorted(lqs) == [
        ("nerf-batch", "nerf-exp", "nerf-exp"),
        ("nerf-dev", "nerf-exp", "nerf-exp"),
        ("nlp", "nlp-finetune", "nlp-finetune"),
        ("serving-prod", "serving-online", "serving-online"),
        ("vision-train", "vision-train", "vision-train"),
    ]


def test_workload_priority_class_per_tier(kueue):
    wpcs = [(o["metadata"]["name"], o["value"]) for o in kueue if o["kind"] == "WorkloadPriorityClass"]
    assert wpcs == [("online-inference", 1000), ("periodic", 800), ("training", 500), ("exploratory", 100)]


def test_kueue_objects_come_in_dependency_order(kueue):
    order = kinds(kueue)
    first = {k: order.index(k) for k in set(order)}
    last = {k: len(order) - 1 - order[::-1].index(k) for k in set(order)}
    assert last["PriorityClass"] < first["WorkloadPriorityClass"]
    assert last["ResourceFlavor"] < first["Cohort"]
    assert last["Cohort"] < first["ClusterQueue"]
    assert last["ClusterQueue"] < first["Namespace"]
    # validate_objects also checks every reference (cohort parents, flavors, namespaces) points backwards
    assert validate_objects(kueue, ["1.35"]) == []


# --- Volcano ---------------------------------------------------------------------------------------------------


def test_volcano_queue_tree_has_a_subtree_per_gpu_pool(volcano):
    parents = {o["metadata"]["name"]: o["spec"]["parent"] for o in volcano if o["kind"] == "Queue"}
    h100 = {name: parent for name, parent in parents.items() if name.endswith("-h100") or name == "h100"}
    assert h100 == {
        "h100": "root",
        "product-h100": "h100",
        "serving-h100": "product-h100",
        "research-h100": "h100",
        "nlp-h100": "research-h100",
        "vision-h100": "research-h100",
        "serving-online-h100": "serving-h100",
        "nlp-finetune-h100": "nlp-h100",
        "vision-train-h100": "vision-h100",
    }  # vision-3d and nerf have no H100 quota: no queue in the H100 subtree
    assert {n for n, p in parents.items() if p == "root"} == {"h100", "a100", "l40s", "l40s-shared-4", "l40s-mps-4"}
    assert parents["nerf-exp-l40s-shared-4"] == "nerf-l40s-shared-4"
    names = [o["metadata"]["name"] for o in volcano if o["kind"] == "Queue"]
    assert all(names.index(parent) < names.index(child) for child, parent in parents.items() if parent != "root")
    assert find(volcano, "Queue", "l40s-shared-4")["metadata"]["annotations"] == {
        "gpu-console/node-selector": "nvidia.com/gpu.product=NVIDIA-L40S-SHARED,nvidia.com/gpu.replicas=4,"
        "nvidia.com/gpu.sharing-strategy=time-slicing"
    }
    assert find(volcano, "Queue", "l40s-mps-4")["metadata"]["annotations"] == {
        "gpu-console/node-selector": "nvidia.com/gpu.product=NVIDIA-L40S-SHARED,nvidia.com/gpu.replicas=4,"
        "nvidia.com/gpu.sharing-strategy=mps"
    }


def test_volcano_leaf_queue_amounts(volcano):
    spec = find(volcano, "Queue", "vision-train-h100")["spec"]
    # 24 cores and 192 GiB per H100 on its nodes
    assert spec["deserved"] == {"cpu": 384, "memory": "3072Gi", "nvidia.com/gpu": 16}
    # guarantee = guaranteed - lend_limit: 16 - 12
    assert spec["guarantee"] == {"resource": {"cpu": 96, "memory": "768Gi", "nvidia.com/gpu": 4}}
    # capability = guaranteed + borrow_limit
    assert spec["capability"] == {"cpu": 576, "memory": "4608Gi", "nvidia.com/gpu": 24}
    assert spec["weight"] == 100 and spec["reclaimable"] is True
    a100 = find(volcano, "Queue", "vision-train-a100")["spec"]
    # a100 lends everything (no guarantee), borrows without limit: all a100 guarantees on the cluster (8 + 4);
    # its nodes' MIG profiles (mixed strategy) at 7 1g.10gb and 2 3g.40gb per GPU
    assert "guarantee" not in a100
    assert a100["deserved"] == {
        "cpu": 128,
        "memory": "1024Gi",
        "nvidia.com/gpu": 8,
        "nvidia.com/mig-1g.10gb": 56,
        "nvidia.com/mig-3g.40gb": 16,
    }
    assert a100["capability"]["nvidia.com/gpu"] == 12 and a100["capability"]["nvidia.com/mig-1g.10gb"] == 84
    # the time-sliced pool counts 4 replicas per GPU
    shared = find(volcano, "Queue", "nerf-exp-l40s-shared-4")["spec"]
    assert shared["deserved"]["nvidia.com/gpu"] == 32 and shared["guarantee"]["resource"]["nvidia.com/gpu"] == 16


def test_volcano_tenant_and_pool_queues_sum_their_children(volcano):
    vision = find(volcano, "Queue", "vision-l40s")["spec"]
    assert vision["deserved"] == {"cpu": 128, "memory": "1024Gi", "nvidia.com/gpu": 8}
    assert vision["guarantee"] == {"resource": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 4}}
    assert find(volcano, "Queue", "l40s")["spec"]["deserved"]["nvidia.com/gpu"] == 24  # nerf 8 + serving 16
    assert find(volcano, "Queue", "research-h100")["spec"]["weight"] == 200
    assert find(volcano, "Queue", "nerf-exp-a100")["spec"]["weight"] == 133


def test_volcano_renders_no_kueue_objects(volcano):
    assert set(kinds(volcano)) == {"PriorityClass", "Queue", "Namespace", "ResourceQuota"}


# --- caveats -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("queueing", "needles"),
    [
        (
            "kueue",
            [
                "403 at creation",
                "does not protect them from being preempted",
                "no per-workload non-preemptible flag",
                "must be null without a cohortName",
                "gpu-console-root",
                "weights (a100=2, l40s=1)",
                "a ResourceFlavor per pool",
                "kueue_excluded_resources",
            ],
        ),
        (
            "volcano",
            [
                "403 at creation",
                "does not protect them from being preempted",
                "a subtree per GPU pool",
                "volcano_per_model_resources",
                "cannot be enabled together",
                "ignores weight",
                "volcano#4658",
                "volcano.sh/preemptable",
            ],
        ),
    ],
)
def test_caveats_state_what_the_backend_cannot_express(queueing, needles):
    text = "\n".join(render_kubernetes(representative_state(queueing)).caveats)
    for needle in needles:
        assert needle in text


def test_caveat_for_a_queue_without_namespace_here():
    state = with_queues(representative_state(), *QUEUES, QueueSpec("nlp", "spare", quotas=(QuotaLine("h100", 2),)))
    result = render_kubernetes(state)
    assert any("nlp/spare has no namespace on this cluster" in c for c in result.caveats)
    assert not [o for o in result.objects if "spare" in o["metadata"]["name"]]


def test_caveat_when_a_preemptible_tier_outranks_a_non_preemptible_one():
    state = representative_state()
    state = replace(state, tiers=(*state.tiers, TierSpec("urgent", 2000, preemptible=True, may_borrow=True)))
    assert any(
        "Tier online-inference is non-preemptible but tiers urgent" in c for c in render_kubernetes(state).caveats
    )


# --- names and bad input --------------------------------------------------------------------------------------


def long_name_state(queueing: str):
    tenant = "t" * 40 + "-" + "x" * 22  # 63 characters, the longest slug
    queues = (
        QueueSpec(tenant, "q" * 63, namespaces=("long-a",), quotas=(QuotaLine("h100", 1),)),
        QueueSpec(tenant, "q" * 62 + "r", namespaces=("long-b",), quotas=(QuotaLine("h100", 1),)),
    )
    state = representative_state(queueing)
    return replace(state, tenants=(TenantSpec(tenant, "Long", None),), queues=queues)


@pytest.mark.parametrize(("queueing", "kind"), [("kueue", "ClusterQueue"), ("volcano", "Queue")])
def test_long_names_are_shortened_deterministically_and_stay_distinct(queueing, kind):
    objects = render_kubernetes(long_name_state(queueing)).objects
    leaf = [
        o["metadata"]["name"] for o in objects if o["kind"] == kind and "gpu-console/queue" in o["metadata"]["labels"]
    ]
    assert len(leaf) == 2 and len(set(leaf)) == 2
    assert all(len(n) <= 63 and n.startswith("tttt") for n in leaf)
    assert leaf == [
        o["metadata"]["name"]
        for o in render_kubernetes(long_name_state(queueing)).objects
        if o["metadata"]["name"] in leaf and o["kind"] == kind
    ]
    assert validate_objects(objects, ["1.35"]) == []
    if queueing == "kueue":
        local = [o for o in objects if o["kind"] == "LocalQueue"]
        assert sorted(o["spec"]["clusterQueue"] for o in local) == sorted(leaf)
        assert sorted(o["metadata"]["name"] for o in local) == sorted(leaf)  # the shortened name, as workloads carry


def bad(state, message: str) -> None:
    with pytest.raises(RenderError) as exc:
        render_kubernetes(state)
    assert message in str(exc.value)


def test_rejects_queue_names_that_collide():
    # tenant "vision" queue "train-x" and tenant "vision-train" queue "x" are both "vision-train-x"
    state = representative_state()
    state = replace(
        state,
        tenants=(*state.tenants, TenantSpec("vision-train", "VT", None)),
        queues=(
            *QUEUES,
            QueueSpec("vision", "train-x", namespaces=("a",), quotas=(QuotaLine("h100", 1),)),
            QueueSpec("vision-train", "x", namespaces=("b",), quotas=(QuotaLine("h100", 1),)),
        ),
    )
    bad(state, "is also that of queue")
    bad(replace(state, queueing="volcano"), "is also that of")


def test_volcano_rejects_a_tenant_queue_named_like_a_leaf():
    # tenant "vision-train"'s H100 queue and queue vision/train's H100 leaf are both "vision-train-h100"
    state = representative_state("volcano")
    state = replace(
        state,
        tenants=(*state.tenants, TenantSpec("vision-train", "VT", None)),
        queues=(*QUEUES, QueueSpec("vision-train", "x", namespaces=("b",), quotas=(QuotaLine("h100", 1),))),
    )
    bad(state, "its Volcano queue name 'vision-train-h100' is also that of")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: replace(s, queueing="yunikorn"), "'yunikorn' is not one of kueue, volcano"),
        (lambda s: with_queues(s, QueueSpec("nobody", "q")), "unknown tenant 'nobody'"),
        (lambda s: with_queues(s, QueueSpec("nlp", "q", quotas=(QuotaLine("b200", 1),))), "unknown GPU model"),
        (
            lambda s: with_queues(s, QueueSpec("nlp", "q", quotas=(QuotaLine("h100", 4, lend_limit=5),))),
            "above the guarantee 4",
        ),
        (lambda s: with_queues(s, QueueSpec("nlp", "q", quotas=(QuotaLine("h100", -1),))), "is not an integer >= 0"),
        (
            lambda s: with_queues(s, QueueSpec("nlp", "q", quotas=(QuotaLine("h100", 1, borrow_limit=-2),))),
            "borrow_limit",
        ),
        (
            lambda s: with_queues(s, QueueSpec("nlp", "q", quotas=(QuotaLine("h100", 1), QuotaLine("h100", 2)))),
            "two quota lines",
        ),
        (lambda s: with_queues(s, QueueSpec("nlp", "Bad_Name")), "is not a DNS-1123 label"),
        (lambda s: with_queues(s, QueueSpec("nlp", "q", namespaces=("Team A",))), "is not a DNS-1123 label"),
        (lambda s: with_queues(s, QueueSpec("nlp", "q", namespaces=("kube-system",))), "system namespace"),
        (
            lambda s: with_queues(
                s, QueueSpec("nlp", "a", namespaces=("x",)), QueueSpec("nerf", "b", namespaces=("x",))
            ),
            "already bound",
        ),
        (lambda s: with_queues(s, QueueSpec("nlp", "q"), QueueSpec("nlp", "q")), "appears twice"),
        (
            lambda s: replace(s, tenants=(*s.tenants, TenantSpec("a", "A", "b"), TenantSpec("b", "B", "a"))),
            "form a cycle",
        ),
        (lambda s: replace(s, tenants=(*s.tenants, TenantSpec("a", "A", "ghost"))), "unknown tenant 'ghost'"),
        (lambda s: replace(s, tenants=(*s.tenants, TenantSpec(ROOT_COHORT, "Root", None))), "reserved"),
        (lambda s: replace(s, tiers=(TierSpec("system-x", 1, True, True),)), "reserved by Kubernetes"),
        (lambda s: replace(s, tiers=(TierSpec("huge", 2_000_000_000, True, True),)), "outside"),
    ],
)
def test_rejects_what_no_backend_can_take(change, message):
    bad(change(representative_state()), message)


@pytest.mark.parametrize("name", ["root", "default"])
def test_volcano_rejects_its_own_queue_names(name):
    # a GPU pool's queue is named after the model code, under Volcano's root
    state = representative_state("volcano")
    models = (GpuModelRef(name, "X", "NVIDIA-X", "x"), *state.gpu_models)
    queue = QueueSpec("nlp", "x", namespaces=("nlp-x",), quotas=(QuotaLine(name, 1),))
    bad(replace(state, gpu_models=models, queues=(*QUEUES, queue)), "a queue Volcano creates itself")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (GpuModelRef("H100", "H100", "NVIDIA-H100", "h100"), "is not a DNS-1123 label"),
        (GpuModelRef("h100", "H100", "NVIDIA H100 80GB", "h100"), "is not a valid label value"),
    ],
)
def test_gpu_model_names_must_suit_kubernetes_but_not_slurm(model, message):
    state = replace(representative_state(), gpu_models=(model,), queues=())
    bad(state, message)
    assert render_slurm(state).commands  # Slurm uses neither the code nor the product label
