"""The control-plane model's Kubeflow Trainer and KServe controllers and Kueue's TrainJob integration, against their
documentation (cited in tests/backends/k8s_fake/trainer.py, kserve.py and kueue.py): written apart from the console's
renderers, with hand-written manifests."""

from __future__ import annotations

import pytest

from tests.backends.k8s_fake import FakeKubernetes
from tests.backends.k8s_fake.store import ApiError
from tests.backends.kubernetes.model import (
    cluster_queue,
    condition,
    container,
    create,
    flavor,
    local_queue,
    pods,
    workload_of,
)

NS = "team-a"
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
QUEUE = "kueue.x-k8s.io/queue-name"


@pytest.fixture
def plane():
    fake = FakeKubernetes(addons={"kueue", "kserve", "trainer"}).start()
    fake.add_namespace(NS)
    for i in range(2):
        fake.add_node(f"h100-{i}", gpus=8, cpu="64", memory="512Gi")
    yield fake
    fake.stop()


def torch_distributed() -> dict:
    """The runtime the Trainer ships (manifests/base/runtimes/torch_distributed.yaml), trimmed."""
    node = container(0)
    node["name"] = "node"
    node["command"] = ["/bin/bash", "-c", "echo Torch Distributed Runtime"]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-distributed", "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {
                                    "backoffLimit": 0,
                                    "template": {"spec": {"restartPolicy": "Never", "containers": [node]}},
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def trainjob(name: str, nodes: int = 2, gpus: int = 8, runtime: str = "torch-distributed", **labels) -> dict:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {
                "image": "pytorch",
                "command": ["sleep", "120"],
                "numNodes": nodes,
                "resourcesPerNode": {
                    "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)},
                    "limits": {"nvidia.com/gpu": str(gpus)},
                },
            },
        },
    }


def kueue_setup(fake, gpus: int = 16) -> None:
    create(fake, flavor("h100", H100))
    create(fake, cluster_queue("team-a", {"h100": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": gpus}}))
    create(fake, local_queue("train", NS, "team-a"))


def test_a_trainjob_naming_a_missing_runtime_is_refused_by_the_trainer_webhook(plane):
    with pytest.raises(ApiError) as refused:
        create(plane, trainjob("t", runtime="torch-distributed"))
    assert refused.value.code == 422
    assert "specified clusterTrainingRuntime must be created before the TrainJob is created" in refused.value.message
    assert 'ClusterTrainingRuntime.trainer.kubeflow.org "torch-distributed" not found' in refused.value.message


def test_without_kueue_a_trainjob_runs_its_runtime_with_the_trainer_overrides(plane):
    create(plane, torch_distributed())
    create(plane, trainjob("t"))
    job = plane.get("batch", "v1", "jobs", "t-node-0", NS)
    assert (job["spec"]["parallelism"], job["spec"]["completions"], job["spec"]["suspend"]) == (2, 2, False)
    running = pods(plane, NS, "t-node-0-")
    assert len(running) == 2 and all(p["status"]["phase"] == "Running" for p in running)
    node = running[0]["spec"]["containers"][0]
    assert node["image"] == "pytorch" and node["command"] == ["sleep", "120"]
    assert node["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    env = {e["name"]: e.get("value") for e in node["env"]}
    assert env["PET_NNODES"] == "2" and env["PET_MASTER_ADDR"] == "t-node-0-0.t" and env["PET_MASTER_PORT"] == "29400"
    assert running[0]["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "t"
    tj = plane.get("trainer.kubeflow.org", "v1alpha1", "trainjobs", "t", NS)
    assert condition(tj, "Created")["status"] == "True" and condition(tj, "Suspended")["status"] == "False"
    plane.advance(121)
    tj = plane.get("trainer.kubeflow.org", "v1alpha1", "trainjobs", "t", NS)
    assert condition(tj, "Complete")["status"] == "True"


def test_a_failed_node_fails_the_trainjob(plane):
    create(plane, torch_distributed())
    spec = trainjob("t", nodes=1)
    spec["spec"]["trainer"]["command"] = ["sh", "-c", "sleep 5; false"]
    create(plane, spec)
    plane.advance(6)
    tj = plane.get("trainer.kubeflow.org", "v1alpha1", "trainjobs", "t", NS)
    assert condition(tj, "Failed")["status"] == "True"
    assert condition(tj, "Failed")["reason"] == "JobSetFailed"


def test_kueue_suspends_a_queued_trainjob_and_admits_it_whole_with_its_flavor(plane):
    create(plane, torch_distributed())
    kueue_setup(plane)
    create(plane, trainjob("t", **{QUEUE: "train"}))
    tj = plane.get("trainer.kubeflow.org", "v1alpha1", "trainjobs", "t", NS)
    assert tj["spec"]["suspend"] is False  # admitted at once: 16 GPUs fit
    wl = workload_of(plane, "t", NS)
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 2)]
    assert condition(wl, "Admitted")["status"] == "True"
    assert tj["spec"]["podSpecOverrides"] == [{"targetJobs": [{"name": "node"}], "nodeSelector": H100}]
    running = pods(plane, NS, "t-node-0-")
    assert len(running) == 2 and all(p["spec"]["nodeSelector"] == H100 for p in running)
    plane.advance(121)
    assert condition(workload_of(plane, "t", NS), "Finished")["status"] == "True"


def test_a_trainjob_over_its_quota_stays_suspended_with_kueues_reason(plane):
    create(plane, torch_distributed())
    kueue_setup(plane, gpus=8)
    create(plane, trainjob("t", **{QUEUE: "train"}))
    tj = plane.get("trainer.kubeflow.org", "v1alpha1", "trainjobs", "t", NS)
    assert tj["spec"]["suspend"] is True
    assert condition(tj, "Suspended")["status"] == "True"
    assert pods(plane, NS) == []
    reserved = condition(workload_of(plane, "t", NS), "QuotaReserved")
    assert reserved["status"] == "False" and "insufficient quota" in reserved["message"]


def inference_service(name: str, mode: str = "RawDeployment", **labels) -> dict:
    engine = container(1, cpu="8", memory="64Gi")
    engine.update(name="kserve-container", command=["vllm", "serve"], ports=[{"containerPort": 8000}])
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": NS, "annotations": {"serving.kserve.io/deploymentMode": mode}},
        "spec": {
            "predictor": {
                "minReplicas": 2,
                "maxReplicas": 4,
                **({"labels": labels} if labels else {}),
                "nodeSelector": H100,
                "containers": [engine],
            }
        },
    }


def test_a_raw_deployment_inference_service_serves_through_its_predictor_deployment(plane):
    create(plane, inference_service("llm"))
    deploy = plane.get("apps", "v1", "deployments", "llm-predictor", NS)
    assert deploy["spec"]["replicas"] == 2
    running = pods(plane, NS, "llm-predictor-")
    assert len(running) == 2
    assert running[0]["metadata"]["labels"]["serving.kserve.io/inferenceservice"] == "llm"
    isvc = plane.get("serving.kserve.io", "v1beta1", "inferenceservices", "llm", NS)
    assert condition(isvc, "Ready")["status"] == "True"
    assert isvc["status"]["url"] == "http://llm-predictor.team-a.svc.cluster.local"
    assert plane.get("", "v1", "services", "llm-predictor", NS) is not None


def test_serverless_mode_without_knative_is_not_ready_and_creates_nothing(plane):
    create(plane, inference_service("llm", mode="Serverless"))
    isvc = plane.get("serving.kserve.io", "v1beta1", "inferenceservices", "llm", NS)
    assert condition(isvc, "Ready")["reason"] == "ServerlessModeRejected"
    assert plane.get("apps", "v1", "deployments", "llm-predictor", NS) is None


def test_a_predictor_without_containers_or_model_is_refused(plane):
    isvc = inference_service("llm")
    del isvc["spec"]["predictor"]["containers"]
    with pytest.raises(ApiError, match="must be specified in PredictorSpec"):
        create(plane, isvc)


def test_kueue_admits_the_predictor_pods_through_the_pod_integration(plane):
    kueue_setup(plane, gpus=1)
    create(plane, inference_service("llm", **{QUEUE: "train"}))
    placed = pods(plane, NS, "llm-predictor-")
    admitted = [p for p in placed if not p["spec"].get("schedulingGates")]
    gated = [p for p in placed if p["spec"].get("schedulingGates")]
    assert len(admitted) == 1 and len(gated) == 1  # quota for one GPU: one replica serves, one waits
    isvc = plane.get("serving.kserve.io", "v1beta1", "inferenceservices", "llm", NS)
    assert condition(isvc, "Ready")["status"] == "False"
