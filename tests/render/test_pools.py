"""GPU pools: what the quota objects cover, and that each workload's pods fit exactly their pool's quota.

The cross-checks below apply Kueue's documented admission rules to the console's own renderings, quota side and
workload side together:
* a workload is admitted only if its ClusterQueue covers every resource its pods request (Kueue's default
  Configuration excludes none: https://kueue.sigs.k8s.io/docs/reference/kueue-config.v1beta1/#Resources);
* a flavor can be assigned to a pod set only if the pods' nodeSelector matches the flavor's nodeLabels, on the
  label keys the group's flavors use (https://kueue.sigs.k8s.io/docs/concepts/resource_flavor/), and only if it
  has quota for every requested resource of the group (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/);
* on admission the flavor's labels join the pods' nodeSelector, which some node of the inventory must match.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from kubernetes.utils import parse_quantity

from apps.backends.catalog import catalog_by_code
from apps.backends.render import RenderError, render_kubernetes
from apps.backends.render.desired import QueueSpec, QuotaLine, QuotaSettings
from apps.backends.render.pools import mig_per_gpu
from apps.backends.render.validate import validate_objects
from apps.backends.render.workload import RenderContext
from apps.backends.render.workload import render_kubernetes as render_workload
from apps.workloads.specs import parse_spec
from tests.render.states import GPU_MODELS, NODES, QUEUES, gpu_node, representative_state, with_queues

CATALOG = catalog_by_code()
PRODUCT = {m.code: m.product_label for m in GPU_MODELS}


def objects_of(state, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in render_kubernetes(state).objects if o["kind"] == kind}


def workload(gpu_model: str, sharing: dict | None = None, **extra) -> dict:
    data = {
        "name": "job",
        "tenant": "vision",
        "queue": "train",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["python", "train.py"],
        "workers": 2,
        "gpus_per_worker": 1 if sharing else 8,
        "gpu_model": gpu_model,
        **extra,
    }
    if sharing:
        data["sharing"] = sharing
    return data


def pod_of(data: dict, queueing: str = "kueue") -> dict:
    spec = parse_spec("training", data, CATALOG)
    ctx = RenderContext(
        namespace="vision-train",
        queue_name="vision-train",
        priority_class="training",
        queueing=queueing,
        workload_id=1,
        product_label=PRODUCT[spec.gpu_model],
        hami_node_labels={"gpu": "on"},
        volcano_vgpu=True,
    )
    job = render_workload(spec, ctx).objects[-1]
    if queueing == "volcano":
        return job["spec"]["tasks"][0]["template"] | {"queue": job["spec"]["queue"]}
    return job["spec"]["template"]


def flavors_admitting(cq: dict, flavors: dict[str, dict], pod: dict) -> list[str]:
    """The flavors of the ClusterQueue's resource group Kueue could assign to the pod set (see module note)."""
    [group] = cq["spec"]["resourceGroups"]
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    if not set(requests) <= set(group["coveredResources"]):
        return []  # Kueue: resource ... unavailable in ClusterQueue
    keys = {k for f in group["flavors"] for k in flavors[f["name"]]["spec"]["nodeLabels"]}
    selector = {k: v for k, v in pod["spec"]["nodeSelector"].items() if k in keys}
    out = []
    for flavor in group["flavors"]:
        labels = flavors[flavor["name"]]["spec"]["nodeLabels"]
        quota = {r["name"]: parse_quantity(r["nominalQuota"]) for r in flavor["resources"]}
        if all(labels.get(k) == v for k, v in selector.items()) and all(quota[r] > 0 for r in requests):
            out.append(flavor["name"])
    return out


def nodes_matching(selector: dict) -> list[str]:
    return [n.name for n in NODES if all(n.labels.get(k) == v for k, v in selector.items())]


@pytest.mark.parametrize(
    ("data", "pool", "nodes"),
    [
        (workload("h100"), "h100", ["h100-01", "h100-02"]),
        (workload("a100", {"mode": "mig", "mig_profile": "1g.10gb"}), "a100", ["a100-01", "a100-02", "a100-hami-01"]),
        (workload("a100", {"mode": "hami", "gpumem_mib": 20480, "gpucores": 30}), "a100-hami", ["a100-hami-01"]),
        (workload("l40s", {"mode": "time-slice", "replicas": 4}), "l40s-shared-4", ["l40s-ts-01"]),
        (workload("l40s", {"mode": "mps", "replicas": 4}), "l40s-mps-4", ["l40s-mps-01"]),
    ],
    ids=["whole", "mig", "hami", "time-slice", "mps"],
)
def test_each_sharing_mode_fits_exactly_its_pools_flavor_and_lands_on_its_nodes(data, pool, nodes):
    state = with_queues(
        representative_state(),
        QueueSpec(
            "vision",
            "train",
            ("vision-train",),
            quotas=(QuotaLine("h100", 8), QuotaLine("a100", 8), QuotaLine("l40s", 8)),
        ),
    )
    flavors = objects_of(state, "ResourceFlavor")
    cq = objects_of(state, "ClusterQueue")["vision-train"]
    pod = pod_of(data)
    assert flavors_admitting(cq, flavors, pod) == [pool]
    admitted = {**pod["spec"]["nodeSelector"], **flavors[pool]["spec"]["nodeLabels"]}  # what Kueue injects
    assert nodes_matching(admitted) == nodes


def test_on_main_time_sliced_pods_fitted_no_flavor():
    """The defect of issue 18: pods select the '-SHARED' product, a flavor selecting the plain one fits none."""
    pod = pod_of(workload("l40s", {"mode": "time-slice", "replicas": 4}))
    assert pod["spec"]["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
    flavors = objects_of(representative_state(), "ResourceFlavor")
    assert flavors["l40s-shared-4"]["spec"]["nodeLabels"]["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"


def test_cluster_queues_cover_cpu_and_memory_with_kueues_default_configuration():
    for cq in objects_of(representative_state(), "ClusterQueue").values():
        covered = cq["spec"]["resourceGroups"][0]["coveredResources"]
        assert covered[:3] == ["cpu", "memory", "nvidia.com/gpu"]


def test_cpu_and_memory_come_with_each_gpu_as_the_pools_nodes_have_them():
    cq = objects_of(representative_state(), "ClusterQueue")["nerf-exp"]
    flavors = {f["name"]: {r["name"]: r for r in f["resources"]} for f in cq["spec"]["resourceGroups"][0]["flavors"]}
    # a100: 4 guaranteed; its whole nodes have 128 cores and 1024 GiB per 8 GPUs
    assert flavors["a100"]["cpu"] == {"name": "cpu", "nominalQuota": 64, "borrowingLimit": 64}
    assert flavors["a100"]["memory"] == {"name": "memory", "nominalQuota": "512Gi", "borrowingLimit": "512Gi"}
    # l40s: 8 guaranteed, lends 4; 64 cores and 512 GiB per 4 GPUs
    assert flavors["l40s"]["cpu"] == {"name": "cpu", "nominalQuota": 128, "lendingLimit": 64}
    # without inventory: 8 cores and 64 GiB per GPU, the workload renderer's per-GPU defaults
    bare = objects_of(replace(representative_state(), nodes=()), "ClusterQueue")["nerf-exp"]
    a100 = {r["name"]: r for r in bare["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert (a100["cpu"]["nominalQuota"], a100["memory"]["nominalQuota"]) == (32, "256Gi")


def test_uneven_nodes_give_millicores_and_mebibytes():
    state = representative_state()
    odd = replace(NODES[0], cpu_cores=101, memory_mib=1000)
    state = replace(state, nodes=(odd, *NODES[1:]))
    cq = objects_of(state, "ClusterQueue")["nlp-finetune"]
    h100 = {r["name"]: r["nominalQuota"] for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    # (101 + 192) cores and (1000 MiB + 1536 GiB) over 16 GPUs, rounded up (to 18313m and 98367 MiB), times 8
    assert h100["cpu"] == "146504m" and h100["memory"] == "786936Mi"


def test_a_site_that_excludes_cpu_and_memory_gets_gpu_only_queues():
    state = representative_state()
    state = replace(state, settings=replace(state.settings, kueue_excluded_resources=("cpu", "memory")))
    cq = objects_of(state, "ClusterQueue")["nlp-finetune"]
    assert cq["spec"]["resourceGroups"][0]["coveredResources"] == ["nvidia.com/gpu"]
    assert validate_objects(render_kubernetes(state).objects, ["1.35"]) == []


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        (QuotaSettings(kueue_excluded_resources=("nvidia.com/",)), "kueue_excluded_resources"),
        (QuotaSettings(kueue_excluded_resources="cpu"), "kueue_excluded_resources"),
        (QuotaSettings(hami_node_labels=(("gpu", "on off"),)), "hami_node_labels"),
        (QuotaSettings(hami_node_labels=["gpu"]), "hami_node_labels"),
        (QuotaSettings(hami_split_count=0), "hami_split_count"),
    ],
)
def test_settings_that_cannot_work_are_refused_by_name(settings, field):
    with pytest.raises(RenderError) as exc:
        render_kubernetes(replace(representative_state(), settings=settings))
    assert exc.value.field == field


def test_from_connection_reads_the_cluster_settings():
    settings = QuotaSettings.from_connection(
        {"kueue_excluded_resources": ["cpu"], "hami_node_labels": {"gpu": "on"}, "volcano_vgpu": True}
    )
    assert settings == QuotaSettings(("cpu",), (("gpu", "on"),), 10, True, False)


def test_mig_profiles_the_inventory_has_are_covered_per_gpu():
    cq = objects_of(representative_state(), "ClusterQueue")["vision-train"]
    group = cq["spec"]["resourceGroups"][0]
    assert group["coveredResources"][-2:] == ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"]
    a100 = {r["name"]: r["nominalQuota"] for f in group["flavors"] if f["name"] == "a100" for r in f["resources"]}
    assert (a100["nvidia.com/mig-1g.10gb"], a100["nvidia.com/mig-3g.40gb"]) == (8 * 7, 8 * 2)


@pytest.mark.parametrize(
    ("profile", "memory_mib", "per_gpu"),
    [("1g.10gb", 81920, 7), ("1g.20gb", 81920, 4), ("2g.20gb", 81920, 3), ("3g.40gb", 81920, 2), ("7g.80gb", 81920, 1)],
)
def test_mig_instances_per_gpu(profile, memory_mib, per_gpu):
    assert mig_per_gpu(profile, memory_mib) == per_gpu


def test_hami_flavor_counts_vgpus_memory_and_cores():
    cq = objects_of(representative_state(), "ClusterQueue")["nerf-exp"]
    hami = next(f for f in cq["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "a100-hami")
    amounts = {r["name"]: r["nominalQuota"] for r in hami["resources"]}
    # 4 A100: 10 vGPUs each (HAMi's deviceSplitCount), 81920 MiB each, 100 % each
    assert (amounts["nvidia.com/gpu"], amounts["nvidia.com/gpumem"], amounts["nvidia.com/gpucores"]) == (
        40,
        4 * 81920,
        400,
    )
    assert amounts["nvidia.com/mig-1g.10gb"] == 0


@pytest.mark.parametrize("pool", ["l40s-shared-4", "l40s-mps-4"])
def test_time_sliced_and_mps_flavors_count_replicas(pool):
    cq = objects_of(representative_state(), "ClusterQueue")["serving-online"]
    shared = next(f for f in cq["spec"]["resourceGroups"][0]["flavors"] if f["name"] == pool)
    gpu = next(r for r in shared["resources"] if r["name"] == "nvidia.com/gpu")
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": 64, "borrowingLimit": 0, "lendingLimit": 32}


def test_a_shared_node_without_the_strategy_label_is_in_no_pool():
    """Pods select nvidia.com/gpu.sharing-strategy: a node without it (a device plugin before MPS) runs none."""
    unlabelled = gpu_node("l40s-old-01", "NVIDIA-L40S-SHARED", 4, 64, 512, **{"nvidia.com/gpu.replicas": "2"})
    state = replace(representative_state(), nodes=(*NODES, unlabelled))
    assert not any(name.endswith("-2") for name in objects_of(state, "ResourceFlavor"))


def test_pools_without_nodes_are_not_invented():
    flavors = objects_of(replace(representative_state(), nodes=()), "ResourceFlavor")
    assert sorted(flavors) == ["a100", "h100", "l40s"]


def test_a_pool_flavor_may_not_take_another_models_name():
    state = representative_state()
    other = replace(GPU_MODELS[2], code="l40s-shared-4", product_label="NVIDIA-L40S-X")
    state = replace(state, gpu_models=(*state.gpu_models, other))
    with pytest.raises(RenderError, match="'l40s-shared-4' is also that of"):
        render_kubernetes(
            with_queues(state, *QUEUES, QueueSpec("nlp", "x", ("x",), quotas=(QuotaLine(other.code, 1),)))
        )


# --- Volcano ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "leaf", "pool"),
    [
        (workload("h100"), "vision-train-h100", "h100"),
        (workload("a100", {"mode": "mig", "mig_profile": "1g.10gb"}), "vision-train-a100", "a100"),
        (workload("l40s", {"mode": "time-slice", "replicas": 4}), "vision-train-l40s-shared-4", "l40s-shared-4"),
        (workload("l40s", {"mode": "mps", "replicas": 4}), "vision-train-l40s-mps-4", "l40s-mps-4"),
    ],
    ids=["whole", "mig", "time-slice", "mps"],
)
def test_volcano_workloads_name_a_leaf_of_their_pool_that_quotas_what_they_request(data, leaf, pool):
    state = with_queues(
        representative_state("volcano"),
        QueueSpec(
            "vision",
            "train",
            ("vision-train",),
            quotas=(QuotaLine("h100", 8), QuotaLine("a100", 8), QuotaLine("l40s", 8)),
        ),
    )
    queues = objects_of(state, "Queue")
    pod = pod_of(data, "volcano")
    assert pod["queue"] == leaf and queues[leaf]["metadata"]["labels"]["gpu-console/pool"] == pool
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    deserved = queues[leaf]["spec"]["deserved"]
    assert all(parse_quantity(deserved[name]) > 0 for name in requests)  # volcano#4658: every dimension
    # the pool queue's node selector is what the pods select
    selector = dict(
        kv.split("=") for kv in queues[pool]["metadata"]["annotations"]["gpu-console/node-selector"].split(",")
    )
    assert selector.items() <= pod["spec"]["nodeSelector"].items()


def test_volcano_vgpu_resources_join_the_whole_pool_when_the_site_runs_volcanos_vgpu_plugin():
    state = representative_state("volcano")
    state = replace(state, settings=replace(state.settings, volcano_vgpu=True))
    deserved = objects_of(state, "Queue")["nerf-exp-a100"]["spec"]["deserved"]
    assert (
        deserved["volcano.sh/vgpu-number"],
        deserved["volcano.sh/vgpu-memory"],
        deserved["volcano.sh/vgpu-cores"],
    ) == (
        40,
        4 * 81920,
        400,
    )
    pod = pod_of(
        workload("a100", {"mode": "hami", "gpumem_mib": 20480, "gpucores": 30}, tenant="nerf", queue="exp"), "volcano"
    )
    assert set(pod["spec"]["containers"][0]["resources"]["requests"]) <= set(deserved)
    assert validate_objects(render_kubernetes(state).objects, ["1.35"]) == []


def test_volcano_per_model_resource_names_stay_an_option():
    state = representative_state("volcano")
    state = replace(state, settings=replace(state.settings, volcano_per_model_resources=True))
    queues = objects_of(state, "Queue")
    assert queues["vision-train-h100"]["spec"]["deserved"]["nvidia.com/gpu-h100"] == 16
    assert "nvidia.com/gpu" not in queues["vision-train-h100"]["spec"]["deserved"]
    assert validate_objects(render_kubernetes(state).objects, ["1.35"]) == []
