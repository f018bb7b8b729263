"""Kubernetes rendering: queueing, resources per sharing mode, placement, labels, names, quoting, validation."""

from __future__ import annotations

import copy
import math
import subprocess
from dataclasses import replace

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from apps.backends.render import rules
from apps.backends.render.errors import RenderError
from apps.backends.render.validate import crd_index
from apps.backends.render.workload import (
    RenderedWorkload,
    WorkloadContext,
    kubernetes_context,
    render_kubernetes,
    validation_errors,
)
from apps.backends.render.workload.common import kube_literal, short_name
from apps.backends.render.workload.engines import engine_argv
from apps.backends.render.workload.inference import waiting_query
from apps.backends.render.workload.training import torchrun_argv
from apps.workloads.specs import apply_overrides, parse_spec
from tests.render.workload.cases import CATALOG, H100, SERVE, SMALL, TRAINING, kube_context
from tests.render.workload.fakes import base_env, hostile, kubelet_expand, recorded, write_fake


def train(**overrides):
    return parse_spec("training", apply_overrides(TRAINING, overrides), CATALOG)


def small(**overrides):
    return parse_spec("training", apply_overrides(SMALL, overrides), CATALOG)


def serve(**overrides):
    return parse_spec("inference", apply_overrides(SERVE, overrides), CATALOG)


def render(spec, queueing="kueue", **ctx):
    return render_kubernetes(spec, kube_context(queueing, spec, **ctx))


def of_kind(result: RenderedWorkload, kind: str, api: str | None = None) -> dict:
    found = [o for o in result.objects if o["kind"] == kind and (api is None or o["apiVersion"] == api)]
    assert len(found) == 1, [o["kind"] for o in result.objects]
    return found[0]


def pod_spec(result: RenderedWorkload) -> dict:
    """The (leader's) pod spec of the workload object: the one that is neither Service nor ScaledObject."""
    spec = next(o for o in result.objects if o["kind"] not in ("Service", "ScaledObject"))["spec"]
    if "tasks" in spec:
        return spec["tasks"][0]["template"]["spec"]
    if "leaderWorkerTemplate" in spec:
        return spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    return spec["template"]["spec"]


def container(result: RenderedWorkload) -> dict:
    return pod_spec(result)["containers"][0]


# --- queueing ---------------------------------------------------------------------------------------------------


def test_kueue_training_is_a_suspended_indexed_job_with_a_headless_service():
    result = render(train())
    service, job = result.objects
    assert (service["kind"], job["apiVersion"], job["kind"]) == ("Service", "batch/v1", "Job")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "acme-train"
    assert labels["kueue.x-k8s.io/priority-class"] == "training"
    spec = job["spec"]
    assert spec["suspend"] is True and spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 4
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (2, 172_800)
    assert spec["template"]["spec"]["subdomain"] == service["metadata"]["name"] == "pretrain-8b"
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_volcano_training_is_a_gang_job_in_its_queue():
    result = render(train(), "volcano")
    (job,) = result.objects
    assert (job["apiVersion"], job["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")
    spec = job["spec"]
    # the queue's leaf in the H100 pool's subtree (apps/backends/render/volcano.py)
    assert (spec["schedulerName"], spec["queue"], spec["priorityClassName"]) == (
        "volcano",
        "acme-train-h100",
        "training",
    )
    assert (spec["minAvailable"], spec["maxRetry"], spec["plugins"]) == (4, 2, {"svc": []})
    assert {"event": "PodEvicted", "action": "RestartJob"} in spec["policies"]
    task = spec["tasks"][0]
    assert (task["name"], task["replicas"]) == ("worker", 4)
    assert task["template"]["spec"]["activeDeadlineSeconds"] == 172_800
    assert "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]


def test_volcano_training_without_retries_has_no_restart_policy():
    """Volcano's webhook turns maxRetry 0 into 3: "no retries" is said by leaving out the restart policies (a
    failed pod then fails the Job), and maxRetry with them."""
    spec = render(train(retries=0), "volcano").objects[0]["spec"]
    assert "policies" not in spec and "maxRetry" not in spec


def test_gang_min_sets_volcano_min_available_and_is_a_caveat_on_kueue():
    spec = train(gang_min=3)
    assert render(spec, "volcano").objects[0]["spec"]["minAvailable"] == 3
    assert any("gang_min 3 below 4 workers" in c for c in render(spec).caveats)


def test_elastic_training_uses_partial_admission_and_torchrun_ranges():
    spec = train(workers=6, elastic={"min_workers": 2, "max_workers": 8, "checkpoint_path": "/ckpt/e"})
    job = render(spec).objects[1]
    assert job["metadata"]["annotations"] == {
        "kueue.x-k8s.io/job-min-parallelism": "2",
        "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
    }
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    # Restarts: the 2 retries, plus one for each of the 4 workers that may join after the first 2 (torchrun
    # counts membership changes against --max-restarts: https://pytorch.org/docs/stable/elastic/quickstart.html).
    assert "--nnodes=2:8" in command and "--max-restarts=6" in command
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["CHECKPOINT_PATH"] == "/ckpt/e"
    volcano = render(spec, "volcano").objects[0]["spec"]
    assert volcano["minAvailable"] == 2 and volcano["tasks"][0]["replicas"] == 6
    assert {"event": "PodFailed", "action": "RestartPod"} in volcano["policies"]
    # No partial admission when the job starts at its minimum (Kueue accepts 1..parallelism-1 only).
    at_min = train(workers=2, elastic={"min_workers": 2, "max_workers": 8, "checkpoint_path": "/ckpt/e"})
    assert "annotations" not in render(at_min).objects[1]["metadata"]


@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
def test_an_elastic_gang_of_2_to_4_rendezvous_on_a_range(queueing):
    """min 2 of 4 workers: torchrun must accept 2..4 nodes, or a gang started with 2 waits at rendezvous for 4."""
    spec = train(workers=4, retries=1, elastic={"min_workers": 2, "max_workers": 4, "checkpoint_path": "/ckpt/e"})
    argv = container(render(spec, queueing))["command"]
    assert argv[:8] == [
        "torchrun",
        "--nnodes=2:4",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        argv[4],
        "--rdzv-id=pretrain-8b",  # stable: the object name, the same for every pod and every restart
        "--max-restarts=3",  # 1 retry + 2 workers that may join late
        "--no-python",
    ]
    assert argv[4].startswith("--rdzv-endpoint=pretrain-8b-") and argv[4].endswith(":29500")


def test_a_volcano_gang_started_below_its_size_rendezvous_on_a_range():
    """gang_min 2 of 4 without elastic: Volcano starts it with 2 (minAvailable), so torchrun accepts 2..4 and each
    of the 2 late workers may restart the group once; Kueue admits the Job whole, so there it stays fixed at 4."""
    spec = train(workers=4, gang_min=2)
    volcano = render(spec, "volcano")
    assert volcano.objects[0]["spec"]["minAvailable"] == 2
    argv = container(volcano)["command"]
    assert "--nnodes=2:4" in argv and "--max-restarts=2" in argv
    assert any("gang_min 2 of its 4 workers" in c for c in volcano.caveats)
    kueue = container(render(spec, "kueue"))["command"]
    assert "--nnodes=4" in kueue and "--max-restarts=0" in kueue
    fixed = container(render(train(workers=4), "volcano"))["command"]
    assert "--nnodes=4" in fixed and "--max-restarts=0" in fixed


def test_checkpoint_on_no_writable_volume_is_a_caveat():
    spec = train(elastic={"min_workers": 2, "max_workers": 4, "checkpoint_path": "/scratch/ckpt"})
    assert any("/scratch/ckpt is on no writable volume" in c for c in render(spec).caveats)
    fine = train(elastic={"min_workers": 2, "max_workers": 4, "checkpoint_path": "/ckpt/run"})
    assert not any("writable volume" in c for c in render(fine).caveats)


def test_rendezvous_is_worker_zeros_fully_qualified_name():
    kueue = container(render(train()))["command"]
    assert "--rdzv-endpoint=pretrain-8b-0.pretrain-8b.acme-train.svc.cluster.local:29500" in kueue
    volcano = container(render(train(), "volcano"))["command"]
    assert "--rdzv-endpoint=pretrain-8b-worker-0.pretrain-8b.acme-train.svc.cluster.local:29500" in volcano
    other = container(render(train(), cluster_domain="k8s.example"))["command"]
    assert any(a.endswith(".svc.k8s.example:29500") for a in other)


# --- GPUs per sharing mode, node selection -------------------------------------------------------------------


def requests(result: RenderedWorkload) -> dict:
    resources = container(result)["resources"]
    assert {k: v for k, v in resources["requests"].items() if k != "cpu"} == resources["limits"]
    return resources["requests"]


def test_whole_gpus_use_the_stock_nvidia_gpu_and_per_model_names_only_where_the_site_has_them():
    # The stock NVIDIA device plugin advertises nvidia.com/gpu only: Volcano's queues are per GPU pool instead
    assert requests(render(train()))["nvidia.com/gpu"] == "8"
    assert requests(render(train(), "volcano"))["nvidia.com/gpu"] == "8"
    assert not any("per-model" in c for c in render(train(), "volcano").caveats)
    renamed = render(train(), "volcano", per_model_gpu_resources=True)
    assert requests(renamed)["nvidia.com/gpu-h100"] == "8" and "nvidia.com/gpu" not in requests(renamed)
    assert any("nvidia.com/gpu-h100" in c for c in renamed.caveats)
    override = render(train(), "volcano", gpu_resource="nvidia.com/gpu", per_model_gpu_resources=True)
    assert requests(override)["nvidia.com/gpu"] == "8" and not any("per-model" in c for c in override.caveats)


def test_cpu_and_memory_default_per_gpu_or_follow_the_spec():
    assert (requests(render(train()))["cpu"], requests(render(train()))["memory"]) == ("64", "512Gi")
    custom = requests(render(train(cpu=96, memory_gib=1000)))
    assert (custom["cpu"], custom["memory"]) == ("96", "1000Gi")
    assert pod_spec(render(train(memory_gib=10)))["volumes"][0]["emptyDir"]["sizeLimit"] == "5Gi"  # shm: half


def test_mig_requests_one_instance_of_the_profile():
    result = render(small(sharing={"mode": "mig", "mig_profile": "1g.10gb"}))
    assert requests(result) == {"cpu": "4", "memory": "16Gi", "nvidia.com/mig-1g.10gb": "1"}
    assert pod_spec(result)["nodeSelector"] == {"nvidia.com/gpu.product": H100}
    assert "--nproc-per-node=1" in container(result)["command"]


def test_time_slicing_requests_one_replica_on_a_time_sliced_pool():
    result = render(small(sharing={"mode": "time-slice", "replicas": 4}))
    assert requests(result)["nvidia.com/gpu"] == "1"
    assert pod_spec(result)["nodeSelector"] == {
        "nvidia.com/gpu.product": f"{H100}-SHARED",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
        "nvidia.com/gpu.replicas": "4",
    }
    already = render(small(sharing={"mode": "time-slice", "replicas": 2}), product_label=f"{H100}-SHARED")
    assert pod_spec(already)["nodeSelector"]["nvidia.com/gpu.product"] == f"{H100}-SHARED"


@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
def test_mps_requests_one_replica_on_an_mps_pool(queueing):
    """The device plugin's sharing.mps: one nvidia.com/gpu replica (MPS takes no more), on the nodes GFD labels
    -SHARED with the replica count and sharing-strategy mps, the pool's flavor or Volcano queue."""
    result = render(small(sharing={"mode": "mps", "replicas": 4}), queueing)
    assert {k: v for k, v in requests(result).items() if k not in ("cpu", "memory")} == {"nvidia.com/gpu": "1"}
    assert pod_spec(result)["nodeSelector"] == {
        "nvidia.com/gpu.product": f"{H100}-SHARED",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "mps",
    }
    assert "--nproc-per-node=1" in container(result)["command"]
    assert any(c.startswith("MPS: each worker requests one nvidia.com/gpu replica") for c in result.caveats)
    if queueing == "volcano":
        assert result.objects[0]["spec"]["queue"] == "acme-dev-h100-mps-4"
    assert validation_errors(result) == []


def test_an_mps_workload_does_not_take_a_time_sliced_pool_of_the_same_replicas():
    spec = small(sharing={"mode": "mps", "replicas": 4})
    with pytest.raises(RenderError) as exc:
        render(spec, gpu_pools=("h100", "h100-shared-4", "h100-mps-2"))
    assert exc.value.field == "sharing.replicas"
    assert str(exc.value).endswith(
        "no MPS h100 pool with 4 replicas per GPU (nodes labelled nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3-SHARED, "
        "nvidia.com/gpu.replicas=4, nvidia.com/gpu.sharing-strategy=mps); it has h100-mps-2"
    )


def test_hami_requests_a_vgpu_with_memory_and_cores():
    result = render(small(sharing={"mode": "hami", "gpumem_mib": 20480, "gpucores": 30}))
    assert {k: v for k, v in requests(result).items() if k.startswith("nvidia.com/")} == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "20480",
        "nvidia.com/gpucores": "30",
    }
    # HAMi's nodes, as the pool's Kueue flavor "<model>-hami" selects them
    assert pod_spec(result)["nodeSelector"] == {"nvidia.com/gpu.product": H100, "gpu": "on"}


def test_hami_on_volcano_requests_volcanos_own_vgpu_resources():
    """HAMi's webhook would hand pods requesting nvidia.com/gpumem to hami-scheduler, out of Volcano's queues:
    with Volcano the share is Volcano's vGPU resources, in hami-core mode, scheduled by Volcano."""
    result = render(small(sharing={"mode": "hami", "gpumem_mib": 20480, "gpucores": 30}), "volcano")
    assert {k: v for k, v in requests(result).items() if k not in ("cpu", "memory")} == {
        "volcano.sh/vgpu-number": "1",
        "volcano.sh/vgpu-memory": "20480",
        "volcano.sh/vgpu-cores": "30",
    }
    job = result.objects[0]["spec"]
    assert job["schedulerName"] == "volcano" and job["queue"] == "acme-dev-h100"
    assert job["tasks"][0]["template"]["metadata"]["annotations"] == {"volcano.sh/vgpu-mode": "hami-core"}
    assert pod_spec(result)["nodeSelector"] == {"nvidia.com/gpu.product": H100}
    assert validation_errors(result) == []


@pytest.mark.parametrize(
    ("queueing", "ctx", "setting"),
    [("kueue", {"hami_node_labels": {}}, "hami_node_labels"), ("volcano", {"volcano_vgpu": False}, "volcano_vgpu")],
)
def test_hami_is_refused_by_name_where_the_cluster_has_no_hami_pool(queueing, ctx, setting):
    spec = small(sharing={"mode": "hami", "gpumem_mib": 20480, "gpucores": 30})
    with pytest.raises(RenderError) as exc:
        render(spec, queueing, **ctx)
    assert exc.value.field == "sharing.mode" and setting in str(exc.value)


@pytest.mark.parametrize(
    ("sharing", "field", "needle"),
    [
        ({"mode": "time-slice", "replicas": 4}, "sharing.replicas", "no time-sliced h100 pool with 4 replicas"),
        ({"mode": "mps", "replicas": 4}, "sharing.replicas", "no MPS h100 pool with 4 replicas"),
        ({"mode": "mig", "mig_profile": "1g.10gb"}, "sharing.mig_profile", "advertises MIG instances 1g.10gb"),
        (
            {"mode": "hami", "gpumem_mib": 1024, "gpucores": 10},
            "sharing.mode",
            "HAMi node labels gpu=on (setting hami_node_labels)",
        ),
    ],
)
def test_a_shared_gpu_without_its_pool_on_the_cluster_is_refused_by_name(sharing, field, needle):
    """No quota object covers a pool the inventory does not show, and no node would run its pods: the renderer
    refuses it rather than leave it pending forever."""
    spec = small(sharing=sharing)
    with pytest.raises(RenderError) as exc:
        render(spec, gpu_pools=("h100", "h100-shared-2", "nvidia.com/mig-3g.40gb"))
    assert exc.value.field == field and needle in str(exc.value)
    pools = ("h100", "h100-shared-4", "h100-mps-4", "h100-hami", "nvidia.com/mig-1g.10gb")
    assert render(spec, gpu_pools=pools).objects  # with the pool there
    assert render(spec).objects  # pools unknown (gpu_pools None): not checked


def test_time_sliced_work_names_its_pools_volcano_queue():
    result = render(small(sharing={"mode": "time-slice", "replicas": 4}), "volcano")
    assert result.objects[0]["spec"]["queue"] == "acme-dev-h100-shared-4"


def test_tolerations_follow_the_pool_taints():
    result = render(train(), tolerations=[{"key": "a", "value": "b", "effect": "NoExecute"}, {"key": "c"}])
    assert pod_spec(result)["tolerations"] == [
        {"key": "a", "operator": "Equal", "value": "b", "effect": "NoExecute"},
        {"key": "c", "operator": "Exists"},
    ]
    assert "tolerations" not in pod_spec(render(train(), tolerations=[]))


@pytest.mark.parametrize("make", [train, serve])
@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
def test_a_specs_own_tolerations_follow_the_pools(make, queueing):
    spec = make(
        tolerations=[
            {"key": "example.com/spot", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "a", "value": "b", "effect": "NoExecute"},  # the pool's already: once
        ]
    )
    result = render(spec, queueing, tolerations=[{"key": "a", "value": "b", "effect": "NoExecute"}])
    assert pod_spec(result)["tolerations"] == [
        {"key": "a", "operator": "Equal", "value": "b", "effect": "NoExecute"},
        {"key": "example.com/spot", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert validation_errors(result) == []


@pytest.mark.parametrize("make", [train, serve])
@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
def test_secret_env_is_a_secret_key_reference_never_a_value(make, queueing):
    spec = make(secret_env=[{"name": "HF_TOKEN", "secret": "hf-token", "key": "token"}])
    result = render(spec, queueing)
    containers = [c for o in result.objects for c in _containers(o)]
    assert containers
    for one in containers:  # every container of the workload (LWS leaders and workers alike)
        refs = [e for e in one["env"] if e["name"] == "HF_TOKEN"]
        assert refs == [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]
    assert validation_errors(result) == []


def test_a_secret_reference_replaces_the_renderers_default_of_that_name():
    result = render(serve(secret_env=[{"name": "HF_HOME", "secret": "hf", "key": "home"}]))
    env = container(result)["env"]
    assert [e for e in env if e["name"] == "HF_HOME"] == [
        {"name": "HF_HOME", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "home"}}}
    ]


def test_a_hand_built_spec_with_a_bad_reference_or_toleration_is_refused():
    from apps.backends.render.spec import SecretEnv, Toleration

    with pytest.raises(RenderError) as exc:
        render(replace(train(), secret_env=[SecretEnv("HF_TOKEN", "Not_A_Name", "token")]))
    assert exc.value.field == "secret_env[0].secret"
    with pytest.raises(RenderError) as exc:
        render(replace(train(), tolerations=[Toleration("a", "Exists", "b")]))
    assert exc.value.field == "spec tolerations[0].value"


def _containers(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    templates = [spec.get("template")] + [t.get("template") for t in spec.get("tasks") or []]
    lws = spec.get("leaderWorkerTemplate") or {}
    templates += [lws.get("leaderTemplate"), lws.get("workerTemplate")]
    return [c for t in templates if t for c in t["spec"]["containers"]]


@pytest.mark.parametrize(("topology", "key"), [("node", "kubernetes.io/hostname"), ("nvlink", "nvidia.com/gpu.clique")])
def test_kueue_topology_is_a_required_pod_affinity(topology, key):
    spec = train(workers=1, topology="node") if topology == "node" else train(topology="nvlink")
    affinity = pod_spec(render(spec))["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert affinity == [{"labelSelector": {"matchLabels": {"gpu-console/workload": "4242"}}, "topologyKey": key}]


WORKLOAD_CONTEXT = WorkloadContext(
    name="pretrain-8b",
    workload_id="4242",
    queue="acme-train",
    tier="training",
    gpu_model="h100",
    product_label=H100,
    namespace="acme-train",
)


def test_the_clusters_topology_labels_place_a_gang_on_one_leaf():
    """A 4 x 8 gang on one leaf switch, on a site whose leaf label is its own (connection `topology_labels`)."""
    connection = {"queueing": "kueue", "topology_labels": {"leaf": "network.example.com/leaf", "rack": "example/rk"}}
    ctx = kubernetes_context(WORKLOAD_CONTEXT, connection)
    assert ctx.topology_labels["leaf"] == "network.example.com/leaf"
    assert ctx.topology_labels["nvlink"] == "nvidia.com/gpu.clique"  # not in the setting: the default
    result = render_kubernetes(train(topology="leaf"), ctx)
    affinity = pod_spec(result)["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [term["topologyKey"] for term in affinity] == ["network.example.com/leaf"]
    assert any("network.example.com/leaf" in caveat for caveat in result.caveats)
    assert "gpu-console/leaf-switch" not in result.text
    assert validation_errors(result) == []


@pytest.mark.parametrize(
    ("setting", "field", "message"),
    [
        ({"leaf": "not a label"}, "connection.topology_labels.leaf", "is not a node label key"),
        ({"leaf": "-bad/leaf"}, "connection.topology_labels.leaf", "is not a node label key"),
        ({"leaf": 7}, "connection.topology_labels.leaf", "is not a node label key"),
        ({"spine": "site/spine"}, "connection.topology_labels.spine", "not a topology level"),
        (["site/leaf"], "connection.topology_labels", "must be an object"),
    ],
)
def test_a_bad_topology_labels_setting_is_refused_naming_it(setting, field, message):
    with pytest.raises(RenderError) as exc:
        kubernetes_context(WORKLOAD_CONTEXT, {"topology_labels": setting})
    assert exc.value.field == field and message in str(exc.value)


def test_volcano_topology_uses_network_topology_or_host_affinity():
    leaf = render(train(topology="leaf"), "volcano").objects[0]["spec"]
    assert leaf["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert "affinity" not in leaf["tasks"][0]["template"]["spec"]
    node = render(small(topology="node"), "volcano").objects[0]["spec"]
    assert "networkTopology" not in node
    assert node["tasks"][0]["template"]["spec"]["affinity"]["podAffinity"]
    assert "affinity" not in pod_spec(render(train()))  # topology any


# --- labels and names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
@pytest.mark.parametrize("spec", [train(), serve(), serve(tensor_parallel=8, pipeline_parallel=2)], ids=str)
def test_every_object_carries_tenant_queue_and_workload(queueing, spec):
    for obj in render(spec, queueing).objects:
        labels = obj["metadata"]["labels"]
        assert labels["gpu-console/tenant"] == "acme" and labels["gpu-console/workload"] == "4242"
        assert labels["gpu-console/queue"] == spec.queue and labels["app.kubernetes.io/managed-by"] == "gpu-console"
        assert obj["metadata"]["namespace"] == f"acme-{spec.queue}"


def test_non_preemptible_tiers_are_marked_for_volcano():
    annotations = render(serve(autoscaling=None), "volcano").objects[0]["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"scheduling.volcano.sh/queue-name": "acme-serve-h100", "volcano.sh/preemptable": "false"}
    job = render(train(), "volcano", preemptible=False).objects[0]
    assert job["spec"]["tasks"][0]["template"]["metadata"]["annotations"] == {"volcano.sh/preemptable": "false"}
    assert "annotations" not in render(train(), "volcano").objects[0]["spec"]["tasks"][0]["template"]["metadata"]


def test_long_names_are_shortened_deterministically_and_pod_names_stay_valid():
    long = "x" * 63
    spec = train(name=long)
    result = render(spec, "volcano")
    name = result.objects[0]["metadata"]["name"]
    assert len(name) == 48 and name == short_name(long) and name != short_name("x" * 62)
    assert len(f"{name}-worker-9999") <= 63
    assert validation_errors(result) == []
    assert render(spec, name="wl-123-pretrain").objects[0]["metadata"]["name"] == "wl-123-pretrain"
    with pytest.raises(RenderError, match="name"):
        render(spec, name="Bad_Name")


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"queueing": "slurm"}, "queueing"),
        ({"namespace": "Acme"}, "namespace"),
        ({"queue_name": "a b"}, "queue_name"),
        ({"priority_class": ""}, "priority_class"),
        ({"workload_id": "a b"}, "workload_id"),
        ({"workload_id": ""}, "workload_id"),
        ({"product_label": "NVIDIA H100"}, "product_label"),
        ({"product_label": ""}, "product_label"),
        ({"gpu_resource": "nvidia.com/gpu h100"}, "gpu_resource"),
        ({"gpus_per_node": 0}, "gpus_per_node"),
        ({"tolerations": [{"key": "a b"}]}, "tolerations[0].key"),
        ({"tolerations": [{"key": "a", "value": "$(x)"}]}, "tolerations[0].value"),
        ({"tolerations": [{"key": "a", "effect": "Sometimes"}]}, "tolerations[0].effect"),
    ],
)
def test_invalid_context_is_a_render_error_naming_the_field(override, field):
    with pytest.raises(RenderError) as caught:
        render(train(), **override)
    assert caught.value.field == field


def test_hand_built_specs_cannot_smuggle_names():
    with pytest.raises(RenderError, match=r"env\.A;B"):
        render(replace(train(), env={"A;B": "x"}))
    with pytest.raises(RenderError, match="name"):
        render(replace(train(), name="x\n"))
    with pytest.raises(RenderError, match="tenant"):
        render(replace(train(), tenant="a b"), namespace="acme-train", queue_name="acme-train")
    with pytest.raises(TypeError):
        render_kubernetes({"kind": "training"}, kube_context("kueue", train()))  # type: ignore[arg-type]


def test_a_worker_larger_than_this_clusters_nodes_is_refused():
    with pytest.raises(RenderError, match="do not fit this cluster's 4-GPU nodes"):
        render(train(), gpus_per_node=4)


# --- inference ---------------------------------------------------------------------------------------------


def test_single_node_service_is_a_deployment_a_service_a_budget_and_a_scaled_object():
    result = render(serve())
    deployment, service, _budget, scaled = result.objects
    assert [o["kind"] for o in result.objects] == ["Deployment", "Service", "PodDisruptionBudget", "ScaledObject"]
    assert "replicas" not in deployment["spec"]  # KEDA's HPA owns it
    assert deployment["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "acme-serve"
    assert service["metadata"]["name"] == "llama-70b-api"
    assert service["spec"]["selector"] == {"gpu-console/workload": "4242", "gpu-console/role": "server"}
    assert result.endpoint == "http://llama-70b-api.acme-serve.svc.cluster.local:8000"
    spec = scaled["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama-70b"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 6)
    trigger = spec["triggers"][0]
    assert (trigger["type"], trigger["metricType"]) == ("prometheus", "AverageValue")
    assert trigger["metadata"] == {
        "serverAddress": "http://prometheus-operated.monitoring.svc:9090",
        "query": 'sum(vllm:num_requests_waiting{namespace="acme-serve",pod=~"llama-70b-[a-z0-9]+-[a-z0-9]+"})',
        "threshold": "8",
    }
    fixed = render(serve(autoscaling=None))
    assert fixed.objects[0]["spec"]["replicas"] == 2 and len(fixed.objects) == 3


def test_sglang_scales_on_its_queue_metric():
    spec = serve(engine="sglang", image="lmsysorg/sglang:v0.5.3")
    query = of_kind(render(spec), "ScaledObject")["spec"]["triggers"][0]["metadata"]["query"]
    assert query.startswith("sum(sglang:num_queue_reqs{")


def test_probes_give_weight_loading_a_generous_budget():
    engine = container(render(serve(readiness={"initial_delay_s": 900, "period_s": 20})))
    assert engine["startupProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert engine["startupProbe"]["periodSeconds"] * engine["startupProbe"]["failureThreshold"] >= 900
    assert engine["startupProbe"]["failureThreshold"] == math.ceil(900 / 20)
    assert engine["readinessProbe"]["httpGet"]["path"] == "/health" and engine["readinessProbe"]["periodSeconds"] == 20
    assert engine["livenessProbe"]["httpGet"]["path"] == "/health"


def test_graceful_shutdown_drains_before_sigterm():
    result = render(serve(shutdown={"termination_grace_period_s": 200, "drain_seconds": 150}))
    assert pod_spec(result)["terminationGracePeriodSeconds"] == 200
    command = container(result)["lifecycle"]["preStop"]["exec"]["command"]
    assert command[:2] == ["python3", "-c"]
    assert command[3:] == ["8000", "150", "5", "vllm:num_requests_running", "vllm:num_requests_waiting"]


def test_weights_are_mounted_read_only_and_used_as_the_hf_cache():
    engine = container(render(serve()))
    assert {"name": "weights", "mountPath": "/models", "readOnly": True} in engine["volumeMounts"]
    env = {e["name"]: e["value"] for e in engine["env"]}
    assert (env["HF_HOME"], env["HF_HUB_OFFLINE"], env["VLLM_LOGGING_LEVEL"]) == ("/models", "1", "INFO")
    volume = pod_spec(render(serve()))["volumes"][1]
    assert volume == {"name": "weights", "persistentVolumeClaim": {"claimName": "llama-weights", "readOnly": True}}
    path_model = container(render(serve(model="/models/llama-70b")))
    assert "HF_HOME" not in {e["name"] for e in path_model["env"]}
    overridden = container(render(serve(env={"HF_HUB_OFFLINE": "0"})))
    assert {e["name"]: e["value"] for e in overridden["env"]}["HF_HUB_OFFLINE"] == "0"


def test_shm_is_memory_backed():
    volumes = pod_spec(render(serve()))["volumes"]
    assert volumes[0] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}


def test_multi_node_service_is_a_leader_worker_set():
    spec = serve(tensor_parallel=8, pipeline_parallel=2, autoscaling={"enabled": True, "max_replicas": 3})
    result = render(spec)
    lws, service, _budget, scaled = result.objects
    assert (lws["apiVersion"], lws["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    template = lws["spec"]["leaderWorkerTemplate"]
    assert (template["size"], template["restartPolicy"]) == (2, "RecreateGroupOnPodRestart")
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    worker = template["workerTemplate"]["spec"]["containers"][0]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == worker["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "startupProbe" in leader and "startupProbe" not in worker and "ports" not in worker
    assert service["spec"]["selector"]["gpu-console/role"] == "leader"
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": "llama-70b",
    }
    assert 'pod=~"llama-70b-[0-9]+"' in waiting_query(spec, kube_context("kueue", spec), "llama-70b")


@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
def test_a_disruption_budget_keeps_min_replicas_serving_through_a_drain(queueing):
    """policy/v1 PodDisruptionBudget over the service's pods, minAvailable = min_replicas."""
    scaled = render(serve(autoscaling={"enabled": True, "min_replicas": 2, "max_replicas": 6}, replicas=3), queueing)
    budget = of_kind(scaled, "PodDisruptionBudget")
    assert (budget["apiVersion"], budget["metadata"]["name"], budget["metadata"]["namespace"]) == (
        "policy/v1",
        "llama-70b",
        "acme-serve",
    )
    assert budget["spec"] == {"minAvailable": 2, "selector": {"matchLabels": {"gpu-console/workload": "4242"}}}
    assert budget["metadata"]["labels"]["gpu-console/kind"] == "inference"  # cancel finds it with the workload
    assert validation_errors(scaled) == []
    # A fixed count: min_replicas, at most the replicas; when that is every replica, the caveat says a drain waits.
    fixed = render(serve(autoscaling=None, replicas=3), queueing)
    assert of_kind(fixed, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    single = render(serve(autoscaling=None, replicas=1), queueing)
    assert of_kind(single, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    assert any("keeps 1 of 1 replicas serving" in c for c in single.caveats)


@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
def test_a_leader_worker_sets_budget_counts_whole_groups(queueing):
    """Evicting any pod of a group (a worker too) recreates the group: the budget covers leaders and workers and
    keeps min_replicas x group size pods, not min_replicas leaders."""
    spec = serve(tensor_parallel=16, autoscaling={"enabled": True, "min_replicas": 2, "max_replicas": 4}, replicas=2)
    result = render(spec, queueing)
    budget = of_kind(result, "PodDisruptionBudget")
    assert budget["spec"] == {"minAvailable": 4, "selector": {"matchLabels": {"gpu-console/workload": "4242"}}}
    template = of_kind(result, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):  # the selector picks both roles
        assert template[role]["metadata"]["labels"]["gpu-console/workload"] == "4242"
    assert validation_errors(result) == []


def test_volcano_leader_worker_set_names_its_queue():
    result = render(serve(tensor_parallel=16, autoscaling=None), "volcano")
    lws = result.objects[0]
    assert lws["metadata"]["annotations"] == {"scheduling.volcano.sh/queue-name": "acme-serve-h100"}
    assert lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["schedulerName"] == "volcano"
    assert any("gangSchedulingManagement" in c for c in result.caveats)


def test_inference_is_laid_out_on_this_clusters_nodes():
    spec = serve(tensor_parallel=8, autoscaling=None)  # parsed for 8-GPU nodes: one node per replica
    result = render(spec, gpus_per_node=4)
    assert result.objects[0]["kind"] == "LeaderWorkerSet"
    assert result.objects[0]["spec"]["leaderWorkerTemplate"]["size"] == 2
    twelve = parse_spec("inference", apply_overrides(SERVE, {"tensor_parallel": 12}), CATALOG, gpus_per_node=12)
    with pytest.raises(RenderError, match="whole 8-GPU nodes"):
        render(twelve, gpus_per_node=8)


# --- exact arguments through the kubelet --------------------------------------------------------------------


@given(st.text(st.characters(blacklist_categories=("Cs",))))
def test_kube_literal_survives_the_kubelets_expansion(value):
    env = {"HOME": "/root", "A": "expanded", "": "empty"}
    assert kubelet_expand(kube_literal(value), env) == value


def test_kubelet_expansion_emulation_matches_kubernetes_semantics():
    env = {"VAR": "x"}
    assert kubelet_expand("$(VAR)", env) == "x"
    assert kubelet_expand("$$(VAR)", env) == "$(VAR)"
    assert kubelet_expand("$(MISSING)", env) == "$(MISSING)"
    assert kubelet_expand("$VAR $", env) == "$VAR $"
    assert kubelet_expand("$(VAR", env) == "$(VAR"


def test_hostile_training_arguments_reach_torchrun_exactly(tmp_path):
    values = hostile(tmp_path / "pwned")
    spec = train(command=["python", *values], args=values, env={f"V{i}": v for i, v in enumerate(values)})
    for queueing in ("kueue", "volcano"):
        result = render(spec, queueing)
        assert validation_errors(result) == []
        assert list(yaml.safe_load_all(result.to_yaml())) == result.objects  # the YAML text is exact too
        engine = container(result)
        env = {"HOME": "/root", "V1": "leak", "HOSTNAME": "pod"}
        argv = [kubelet_expand(arg, env) for arg in engine["command"]]
        assert argv[argv.index("--") + 1 :] == ["python", *values, *values]
        assert {e["name"]: kubelet_expand(e["value"], env) for e in engine["env"]} == spec.env


def test_hostile_engine_arguments_reach_the_engine_exactly(tmp_path):
    values = [v for v in hostile(tmp_path / "pwned") if v]
    spec = serve(extra_args=values, env={"X": "$(HOME)"}, autoscaling=None)
    engine = container(render(spec))
    assert [kubelet_expand(arg, {"HOME": "/root"}) for arg in engine["command"]] == engine_argv(spec)
    assert {e["name"]: kubelet_expand(e["value"], {"HOME": "/r"}) for e in engine["env"]}["X"] == "$(HOME)"


def test_sglang_multi_node_ranks_come_from_leader_worker_set(tmp_path):
    values = [v for v in hostile(tmp_path / "pwned") if v and not v.startswith("--nnodes")]
    spec = serve(
        engine="sglang", image="lmsysorg/sglang:v0.5.3", tensor_parallel=16, extra_args=values, autoscaling=None
    )
    lws = render(spec).objects[0]
    env = {"LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1", "LWS_LEADER_ADDRESS": "llama-70b-0.llama-70b.acme-serve"}
    for role in ("leaderTemplate", "workerTemplate"):
        command = lws["spec"]["leaderWorkerTemplate"][role]["spec"]["containers"][0]["command"]
        expected = engine_argv(spec, distributed=("2", "1", "llama-70b-0.llama-70b.acme-serve:20000"))
        assert [kubelet_expand(arg, env) for arg in command] == expected


def test_vllm_multi_node_scripts_run_ray_then_exactly_the_engine(tmp_path):
    """Run the leader's and a worker's shell scripts (after the kubelet's expansion) with fake ray/vllm."""
    pwned = tmp_path / "pwned"
    values = [v for v in hostile(pwned) if v]
    spec = serve(tensor_parallel=8, pipeline_parallel=2, extra_args=values, autoscaling=None)
    template = render(spec).objects[0]["spec"]["leaderWorkerTemplate"]
    bin_dir, record = tmp_path / "bin", tmp_path / "record"
    bin_dir.mkdir()
    record.mkdir()
    for fake in ("ray", "vllm"):
        write_fake(bin_dir, fake)
    write_fake(bin_dir, "python3", 'echo "$LWS_GROUP_SIZE"')  # "every node has joined"
    env = base_env(bin_dir, record, tmp_path, LWS_GROUP_SIZE="2", LWS_LEADER_ADDRESS="llama-70b-0.llama-70b")
    for role in ("leaderTemplate", "workerTemplate"):
        command = template[role]["spec"]["containers"][0]["command"]
        assert command[:2] == ["/bin/bash", "-c"]
        script = kubelet_expand(command[2], env)
        subprocess.run(["bash", "-c", script], env=env, cwd=tmp_path, check=True, timeout=30)
    assert recorded(record, "ray", 0) == ["start", "--head", "--port=6379", "--disable-usage-stats"]
    assert recorded(record, "ray", 1) == [
        "start",
        "--address=llama-70b-0.llama-70b:6379",
        "--disable-usage-stats",
        "--block",
    ]
    assert recorded(record, "vllm") == engine_argv(spec, ray=True)[1:]
    assert not pwned.exists()


def test_torchrun_argv_ends_its_options_before_the_users_command():
    spec = train(command=["python"], args=["--nnodes=99", "--"])
    argv = torchrun_argv(spec, "host:29500", "job", "4")
    assert argv[argv.index("--") :] == ["--", "python", "--nnodes=99", "--"]
    assert argv.index("--no-python") < argv.index("--")


# --- validation -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("queueing", ["kueue", "volcano"])
@pytest.mark.parametrize(
    "spec",
    [
        train(),
        train(topology="node", workers=1),
        train(topology="nvlink"),
        small(sharing={"mode": "mig", "mig_profile": "3g.40gb"}),
        small(sharing={"mode": "time-slice", "replicas": 4}),
        small(sharing={"mode": "hami", "gpumem_mib": 10000, "gpucores": 20}),
        train(workers=6, elastic={"min_workers": 2, "max_workers": 8, "checkpoint_path": "/ckpt/x"}),
        serve(),
        serve(autoscaling=None, weights=None),
        serve(engine="sglang", image="lmsysorg/sglang:v0.5.3", data_parallel=2),
        serve(tensor_parallel=8, pipeline_parallel=2),
        serve(engine="sglang", image="lmsysorg/sglang:v0.5.3", tensor_parallel=16),
    ],
    ids=lambda s: f"{s.kind}-{getattr(s, 'engine', '')}{getattr(s, 'sharing', '')}",
)
def test_every_rendering_validates_strictly(queueing, spec):
    assert validation_errors(render(spec, queueing)) == []


def mutated(result: RenderedWorkload, change) -> RenderedWorkload:
    objects = copy.deepcopy(result.objects)
    change(objects)
    return RenderedWorkload(objects)


@pytest.mark.parametrize(
    ("make", "change", "fragment"),
    [
        (
            lambda: render(train(), "volcano"),
            lambda o: o[0]["spec"]["tasks"][0]["template"]["spec"]["containers"][0].update(resource={}),
            "Additional properties are not allowed ('resource' was unexpected)",
        ),
        (lambda: render(train()), lambda o: o[1]["spec"].update(parallelism="4"), "'4' is not of type"),
        (
            lambda: render(serve(tensor_parallel=16)),
            lambda o: o[0]["spec"]["leaderWorkerTemplate"].update(size="2"),
            "'2' is not of type 'integer'",
        ),
        (
            lambda: render(serve()),
            lambda o: o[3]["spec"].update(minReplicaCount=9),
            "minReplicaCount must be less than or equal to maxReplicaCount",
        ),
        (
            lambda: render(serve()),
            lambda o: o[2]["spec"].update(minAvailable=[1]),
            "PodDisruptionBudget",
        ),
        (lambda: render(serve()), lambda o: o[0]["spec"].update(replica=1), "'replica' was unexpected"),
        (
            lambda: render(train()),
            lambda o: o[1]["metadata"]["labels"].update({"gpu-console/tenant": "a b"}),
            "is not a valid label value",
        ),
    ],
)
def test_the_validator_catches_what_a_strict_server_would_refuse(make, change, fragment):
    errors = validation_errors(mutated(make(), change))
    assert any(fragment in e for e in errors), errors


def cel_rule_messages(api_version: str, kind: str) -> list[str]:
    found: list[str] = []

    def walk(node, path):
        if isinstance(node, dict):
            for r in node.get("x-kubernetes-validations", []):
                if not path.startswith(".status"):
                    found.append(r["message"])
            for key, child in (node.get("properties") or {}).items():
                walk(child, f"{path}.{key}")
            for key in ("items", "additionalProperties"):
                if isinstance(node.get(key), dict):
                    walk(node[key], path)

    walk(crd_index()[(api_version, kind)].schema, "")
    return found


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("batch.volcano.sh/v1alpha1", "Job"),
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
        ("keda.sh/v1alpha1", "ScaledObject"),
    ],
)
def test_every_cel_rule_of_a_rendered_custom_kind_is_checked(api_version, kind):
    implemented = {r.message for r in rules.RULES if r.kind == kind and r.source == "CEL"}
    waived = {message for (k, message) in rules.WAIVED if k == kind}
    missing = [m for m in cel_rule_messages(api_version, kind) if m not in implemented | waived]
    assert missing == []


def test_validation_needs_no_namespace_object_from_the_caller():
    result = render(train())
    assert all(o["kind"] != "Namespace" for o in result.objects)
    assert validation_errors(result, ("1.35",)) == []
