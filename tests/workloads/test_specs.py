"""Training and inference specs: every validation error names its exact field; round trips; conversions.

Pure tests (no database): the catalog is apps.backends.catalog's, as the GpuModel table is seeded from it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.backends.catalog import catalog_by_code
from apps.backends.types import Sharing, Topology
from apps.workloads.specs import (
    DEFAULT_IMAGES,
    InferenceServiceSpec,
    SpecError,
    TrainingJobSpec,
    apply_overrides,
    image_error,
    parse_spec,
    to_backend_spec,
)

CATALOG = catalog_by_code()


def training(**overrides) -> dict:
    spec = {
        "name": "pretrain",
        "tenant": "acme",
        "queue": "train",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["python", "train.py"],
        "workers": 4,
        "gpus_per_worker": 8,
        "gpu_model": "h100",
    }
    return apply_overrides(spec, overrides)


def inference(**overrides) -> dict:
    spec = {
        "name": "llama",
        "tenant": "acme",
        "queue": "serve",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_model": "h100",
    }
    return apply_overrides(spec, overrides)


def errors(kind: str, data: object, gpus_per_node: int = 8) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse_spec(kind, data, CATALOG, gpus_per_node=gpus_per_node)  # type: ignore[arg-type]
    assert str(caught.value).startswith("Invalid spec: ")
    return caught.value.fields


def assert_error(kind: str, data: object, field: str, fragment: str, gpus_per_node: int = 8) -> None:
    fields = errors(kind, data, gpus_per_node)
    assert field in fields, f"expected an error on {field!r}, got {fields}"
    assert any(fragment in message for message in fields[field]), fields[field]


# --- every error path, with its exact field --------------------------------------------------------------

COMMON_CASES = [
    # (overrides, field, fragment) valid for both kinds
    ({"name": "Not_DNS"}, "name", "DNS-1123 label"),
    ({"name": "a" * 64}, "name", "1 to 63"),
    ({"name": "-lead"}, "name", "DNS-1123"),
    ({"name": "trail-"}, "name", "DNS-1123"),
    ({"name": "x\n"}, "name", "DNS-1123"),
    ({"name": 7}, "name", "must be a string, not an integer"),
    ({"tenant": "Acme"}, "tenant", "tenant slug"),
    ({"queue": "q_1"}, "queue", "queue name"),
    ({"tier": "Gold"}, "tier", "tier name"),
    ({"gpu_model": "b200"}, "gpu_model", "unknown GPU model 'b200'; known: a100, h100, h200, l20, l40s, rtx4090"),
    ({"colour": "red"}, "colour", "unknown field; allowed:"),
    ({"env": ["A=1"]}, "env", "must be an object"),
    ({"env": {"1ABC": "x"}}, "env.1ABC", "not a variable name"),
    ({"env": {"A-B": "x"}}, "env.A-B", "not a variable name"),
    ({"env": {"CHECKPOINT_PATH": "/x"}}, "env.CHECKPOINT_PATH", "set by the console"),
    ({"env": {"SLURM_JOB_ID": "1"}}, "env.SLURM_JOB_ID", "reserved"),
    ({"env": {"LWS_LEADER_ADDRESS": "x"}}, "env.LWS_LEADER_ADDRESS", "reserved"),
    ({"env": {"FOO": 1}}, "env.FOO", "must be a string, not an integer"),
    ({"env": {"FOO": "a\x00b"}}, "env.FOO", "without NUL"),
    ({"env": {"FOO": "x" * 32_769}}, "env.FOO", "at most 32768"),
    ({"env": {"FOO": "\ud800"}}, "env.FOO", "text"),
    ({"env": {f"V{i}": "x" for i in range(129)}}, "env", "at most 128 variables"),
    ({"cpu": 0}, "cpu", "between 1 and 1024"),
    ({"cpu": "8"}, "cpu", "must be an integer, not a string"),
    ({"memory_gib": True}, "memory_gib", "must be an integer, not a boolean"),
    ({"memory_gib": 1.5}, "memory_gib", "must be an integer, not a number"),
    # tolerations: Kubernetes's rules, and nothing that gets work past a node's own state
    ({"tolerations": {"key": "a"}}, "tolerations", "must be a list of {key, operator, value, effect}"),
    ({"tolerations": ["dedicated"]}, "tolerations[0]", "must be a JSON object"),
    ({"tolerations": [{"key": "a", "colour": "x"}]}, "tolerations[0].colour", "unknown field"),
    ({"tolerations": [{"operator": "Exists"}]}, "tolerations[0].key", "this field is required"),
    ({"tolerations": [{"key": "", "operator": "Exists"}]}, "tolerations[0].key", "toleration of every taint"),
    ({"tolerations": [{"key": "bad key"}]}, "tolerations[0].key", "is not a taint key"),
    ({"tolerations": [{"key": "a", "operator": "In"}]}, "tolerations[0].operator", "not one of Equal, Exists"),
    ({"tolerations": [{"key": "a", "effect": "Never"}]}, "tolerations[0].effect", "not one of NoSchedule"),
    ({"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]}, "tolerations[0].value", "must be empty"),
    ({"tolerations": [{"key": "a", "value": "x y"}]}, "tolerations[0].value", "not a taint value"),
    ({"tolerations": [{"key": "a", "value": 1}]}, "tolerations[0].value", "must be a string"),
    ({"tolerations": [{"key": "node.kubernetes.io/unschedulable"}]}, "tolerations[0].key", "a node's own state"),
    ({"tolerations": [{"key": "node.kubernetes.io/not-ready"}]}, "tolerations[0].key", "a node's own state"),
    ({"tolerations": [{"key": "gpu-console/rma"}]}, "tolerations[0].key", "a node's own state"),
    ({"tolerations": [{"key": "ToBeDeletedByClusterAutoscaler"}]}, "tolerations[0].key", "a node's own state"),
    ({"tolerations": [{"key": f"k{i}"} for i in range(17)]}, "tolerations", "at most 16 items"),
    # secret_env: references only, with the names Kubernetes allows
    ({"secret_env": {"HF_TOKEN": "hf"}}, "secret_env", "must be a list of {name, secret, key}"),
    ({"secret_env": [{"name": "HF_TOKEN", "secret": "hf"}]}, "secret_env[0].key", "this field is required"),
    ({"secret_env": [{"name": "A", "secret": "s", "key": "k", "value": "x"}]}, "secret_env[0].value", "unknown"),
    ({"secret_env": [{"name": "1A", "secret": "s", "key": "k"}]}, "secret_env[0].name", "not a variable name"),
    ({"secret_env": [{"name": "SLURM_X", "secret": "s", "key": "k"}]}, "secret_env[0].name", "reserved"),
    (
        {"env": {"HF_TOKEN": "hf_abc"}, "secret_env": [{"name": "HF_TOKEN", "secret": "s", "key": "k"}]},
        "secret_env[0].name",
        "HF_TOKEN is also in env",
    ),
    (
        {"secret_env": [{"name": "A", "secret": "s", "key": "k"}, {"name": "A", "secret": "t", "key": "k"}]},
        "secret_env[1].name",
        "A is already secret_env[0]",
    ),
    ({"secret_env": [{"name": "A", "secret": "HF", "key": "k"}]}, "secret_env[0].secret", "not a Secret name"),
    ({"secret_env": [{"name": "A", "secret": "s" * 254, "key": "k"}]}, "secret_env[0].secret", "not a Secret name"),
    ({"secret_env": [{"name": "A", "secret": "s", "key": "a/b"}]}, "secret_env[0].key", "not a key of a Secret"),
    ({"secret_env": [{"name": "A", "secret": "s", "key": ".."}]}, "secret_env[0].key", "not a key of a Secret"),
    ({"secret_env": [{"name": "A", "secret": "s", "key": "..x"}]}, "secret_env[0].key", "not a key of a Secret"),
    ({"secret_env": [{"name": "A", "secret": "s", "key": ""}]}, "secret_env[0].key", "not a key of a Secret"),
    (
        {"secret_env": [{"name": f"V{i}", "secret": "s", "key": "k"} for i in range(65)]},
        "secret_env",
        "at most 64 items",
    ),
]


@pytest.mark.parametrize(("overrides", "field", "fragment"), COMMON_CASES)
@pytest.mark.parametrize("kind", ["training", "inference"])
def test_common_fields_are_validated(kind, overrides, field, fragment):
    base = training() if kind == "training" else inference()
    data = {**base, **overrides}  # no deep merge: the case replaces the field
    assert_error(kind, data, field, fragment)


@pytest.mark.parametrize("field", ["name", "tenant", "queue", "gpu_model"])
@pytest.mark.parametrize("kind", ["training", "inference"])
def test_required_fields(kind, field):
    data = training() if kind == "training" else inference()
    del data[field]
    assert_error(kind, data, field, "this field is required")


def test_training_requires_image_and_command_inference_the_model():
    assert_error("training", {k: v for k, v in training().items() if k != "image"}, "image", "required")
    assert_error("training", {k: v for k, v in training().items() if k != "command"}, "command", "required")
    assert_error("inference", {k: v for k, v in inference().items() if k != "model"}, "model", "required")


def test_kind_and_shape():
    assert errors("batch", training()) == {"kind": ["'batch' is not one of training, inference"]}
    assert_error("training", {**training(), "kind": "inference"}, "kind", "submitted as 'training'")
    assert_error("training", ["not", "an", "object"], "spec", "must be a JSON object, not a list")
    assert_error("inference", None, "spec", "not null")


def test_every_error_is_reported_at_once():
    fields = errors("training", training(name="Bad!", workers=0, image="x y", env={"1": "a"}, topology="ring"))
    assert {"name", "workers", "image", "env.1", "topology"} <= set(fields)


def test_nested_fields_at_the_top_level_get_a_hint():
    fields = errors("training", {**training(), "sharing": "mig", "mig_profile": "1g.10gb", "gpus_per_worker": 1})
    assert "did you mean sharing.mig_profile?" in fields["mig_profile"][0]
    assert fields["sharing.mig_profile"] == ["required with MIG sharing, e.g. 1g.10gb or 3g.40gb"]


IMAGE_CASES = [
    ("", "required"),
    ("pytorch latest", "spaces or shell characters"),
    ("pytorch:$(id)", "spaces or shell characters"),
    ("pytorch:`id`", "spaces or shell characters"),
    ("pytorch:1;rm", "spaces or shell characters"),
    ("nvcr.io/nvidia/PyTorch:24.08", "must be lower-case"),
    ("nvcr.io/nvidia/pytorch", "no tag or digest"),
    ("nvcr.io/nvidia/pytorch:-bad", "not a valid tag"),
    ("nvcr.io/nvidia/pytorch:" + "t" * 129, "not a valid tag"),
    ("nvcr.io/nvidia/pytorch@sha256:abc", "not a digest"),
    ("nvcr.io/nvidia/pytorch@sha256:" + "A" * 64, "64 lower-case hex"),
    ("bad_host.io:port/x:1", "not a valid registry host"),
    ("nvcr.io/:1", "the repository path is missing"),
    ("nvcr.io/nvidia/py..torch:1", "not a valid repository path component"),
    ("nvidia/-pytorch:1", "not a valid repository path component"),
    ("registry.io/" + "a" * 250 + ":1", "longer than 255"),
]


@pytest.mark.parametrize(("image", "fragment"), IMAGE_CASES)
def test_malformed_image_references_are_refused(image, fragment):
    assert_error("training", training(image=image), "image", fragment)


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu:22.04",
        "vllm/vllm-openai:v0.11.0",
        "lmsysorg/sglang:v0.5.3",
        "nvcr.io/nvidia/pytorch:24.08-py3",
        "localhost:5000/team/trainer:dev_1",
        "registry.example.com:443/a/b/c:1.0",
        "ghcr.io/org/img@sha256:" + "0" * 64,
        "ghcr.io/org/img:1.2@sha256:" + "a" * 64,
        "[fd00::1]:5000/img:1",
        "my__repo/with-dashes---ok:latest",
    ],
)
def test_valid_image_references(image):
    assert image_error(image) is None


TRAINING_CASES = [
    ({"command": []}, "command", "the program to run is required"),
    ({"command": "python train.py"}, "command", "must be a list of strings, not a string"),
    ({"command": ["-m", "x"]}, "command[0]", "cannot be empty or start with '-'"),
    ({"command": ["", "x"]}, "command[0]", "cannot be empty"),
    ({"command": ["python", 3]}, "command[1]", "must be a string, not an integer"),
    ({"command": ["python", "a\x00b"]}, "command[1]", "NUL"),
    ({"command": ["python", "\udc80"]}, "command[1]", "not valid Unicode text"),
    ({"command": ["python", "x" * 8193]}, "command[1]", "at most 8192"),
    ({"args": ["a"] * 257}, "args", "at most 256 items"),
    ({"args": [None]}, "args[0]", "not null"),
    ({"workers": 0}, "workers", "between 1 and 10000"),
    ({"workers": "4"}, "workers", "must be an integer"),
    ({"gpus_per_worker": 0}, "gpus_per_worker", "between 1 and 64"),
    ({"gpus_per_worker": 9}, "gpus_per_worker", "9 GPUs exceed the 8 GPUs per node (h100 nodes)"),
    ({"topology": "ring"}, "topology", "not one of any, node, nvlink, leaf"),
    ({"topology": "node"}, "topology", "4 x 8 = 32 GPUs exceed the 8 GPUs per node"),
    ({"max_runtime_s": 59}, "max_runtime_s", "between 60 and"),
    ({"retries": -1}, "retries", "between 0 and 100"),
    ({"gang_min": 5}, "gang_min", "at most the 4 workers"),
    ({"gang_min": 0}, "gang_min", "between 1 and"),
    ({"sharing": 5}, "sharing", "must be a JSON object, not an integer"),
    ({"sharing": {"mode": "vgpu"}}, "sharing.mode", "'vgpu' is not one of whole, mig, time-slice, hami, mps"),
    ({"sharing": {"mode": "whole", "colour": 1}}, "sharing.colour", "unknown field"),
    ({"sharing": "mig", "gpus_per_worker": 1}, "sharing.mig_profile", "required with MIG"),
    ({"sharing": {"mode": "mig", "mig_profile": "9g.99gb"}, "gpus_per_worker": 1}, "sharing.mig_profile", "profiles"),
    (
        {"sharing": {"mode": "mig", "mig_profile": "1g.10gb"}, "gpus_per_worker": 1, "gpu_model": "l40s"},
        "sharing.mode",
        "l40s does not support MIG; MIG-capable models: a100, h100, h200",
    ),
    (
        {"sharing": {"mode": "mig", "mig_profile": "1g.18gb"}, "gpus_per_worker": 1},
        "sharing.mig_profile",
        "h100 has no MIG profile '1g.18gb'",
    ),
    (
        {"sharing": {"mode": "mig", "mig_profile": "1g.10gb", "replicas": 4}, "gpus_per_worker": 1},
        "sharing.replicas",
        "applies to time-slice or MPS sharing, not 'mig'",
    ),
    ({"sharing": {"mode": "whole", "gpucores": 50}}, "sharing.gpucores", "applies to HAMi sharing"),
    ({"sharing": {"mode": "mig", "mig_profile": "1g.10gb"}}, "gpus_per_worker", "gpus_per_worker must be 1"),
    ({"sharing": "time-slice", "gpus_per_worker": 1}, "sharing.replicas", "required with time-slice"),
    ({"sharing": {"mode": "time-slice", "replicas": 1}, "gpus_per_worker": 1}, "sharing.replicas", "between 2 and 64"),
    ({"sharing": "mps", "gpus_per_worker": 1}, "sharing.replicas", "required with MPS sharing"),
    (
        {"sharing": {"mode": "mps", "replicas": 49}, "gpus_per_worker": 1},
        "sharing.replicas",
        "MPS serves at most 48 clients per GPU: 49 replicas cannot be configured",
    ),
    ({"sharing": {"mode": "mps", "replicas": 4, "gpucores": 25}, "gpus_per_worker": 1}, "sharing.gpucores", "HAMi"),
    ({"sharing": {"mode": "mps", "replicas": 4}}, "gpus_per_worker", "gpus_per_worker must be 1"),
    ({"sharing": {"mode": "hami", "gpucores": 30}, "gpus_per_worker": 1}, "sharing.gpumem_mib", "required with HAMi"),
    ({"sharing": {"mode": "hami", "gpumem_mib": 1024}, "gpus_per_worker": 1}, "sharing.gpucores", "required with HAMi"),
    (
        {"sharing": {"mode": "hami", "gpumem_mib": 90_000, "gpucores": 30}, "gpus_per_worker": 1},
        "sharing.gpumem_mib",
        "more than the 81559 MiB of a h100 GPU",
    ),
    (
        {"sharing": {"mode": "hami", "gpumem_mib": 1024, "gpucores": 101}, "gpus_per_worker": 1},
        "sharing.gpucores",
        "1 and 100",
    ),
    (
        {"sharing": {"mode": "mig", "mig_profile": "3g.40gb"}, "gpus_per_worker": 1, "workers": 17, "topology": "node"},
        "topology",
        "holds at most 16 mig workers (2 per GPU x 8 GPUs per node",
    ),
    (
        {"sharing": {"mode": "time-slice", "replicas": 4}, "gpus_per_worker": 1, "workers": 33, "topology": "node"},
        "topology",
        "at most 32 time-slice workers",
    ),
    (
        {"sharing": {"mode": "mps", "replicas": 2}, "gpus_per_worker": 1, "workers": 17, "topology": "node"},
        "topology",
        "at most 16 mps workers",
    ),
    (
        {
            "sharing": {"mode": "hami", "gpumem_mib": 20_000, "gpucores": 25},
            "gpus_per_worker": 1,
            "workers": 33,
            "topology": "node",
        },
        "topology",
        "at most 32 hami workers",
    ),
    ({"elastic": "yes"}, "elastic", "must be a JSON object, not a string"),
    ({"elastic": {"min_workers": 2, "max_workers": 8}}, "elastic.checkpoint_path", "this field is required"),
    ({"elastic": {"max_workers": 8, "checkpoint_path": "/ckpt"}}, "elastic.min_workers", "required"),
    (
        {"elastic": {"min_workers": 2, "max_workers": 8, "checkpoint_path": "ckpt"}},
        "elastic.checkpoint_path",
        "absolute",
    ),
    (
        {"elastic": {"min_workers": 2, "max_workers": 8, "checkpoint_path": "/a/../b"}},
        "elastic.checkpoint_path",
        "normalised",
    ),
    (
        {"elastic": {"min_workers": 8, "max_workers": 2, "checkpoint_path": "/c"}},
        "elastic.max_workers",
        "at least min_workers",
    ),
    ({"elastic": {"min_workers": 5, "max_workers": 8, "checkpoint_path": "/c"}}, "workers", "5 to 8 workers"),
    (
        {"elastic": {"min_workers": 2, "max_workers": 8, "checkpoint_path": "/c"}, "gang_min": 1},
        "gang_min",
        "below elastic",
    ),
    ({"volumes": {"claim": "x"}}, "volumes", "must be a list"),
    ({"volumes": [{"claim": "d", "mount_path": f"/m{i}"} for i in range(17)]}, "volumes", "at most 16 volumes"),
    ({"volumes": ["data"]}, "volumes[0]", "must be a JSON object"),
    ({"volumes": [{"mount_path": "/data"}]}, "volumes[0].claim", "required"),
    ({"volumes": [{"claim": "Data", "mount_path": "/data"}]}, "volumes[0].claim", "PersistentVolumeClaim name"),
    ({"volumes": [{"claim": "d", "mount_path": "data"}]}, "volumes[0].mount_path", "absolute path"),
    ({"volumes": [{"claim": "d", "mount_path": "/data/"}]}, "volumes[0].mount_path", "normalised"),
    ({"volumes": [{"claim": "d", "mount_path": "//data"}]}, "volumes[0].mount_path", "normalised"),
    ({"volumes": [{"claim": "d", "mount_path": "/da ta"}]}, "volumes[0].mount_path", "only letters"),
    ({"volumes": [{"claim": "d", "mount_path": "/data/$(id)"}]}, "volumes[0].mount_path", "only letters"),
    ({"volumes": [{"claim": "d", "mount_path": "/"}]}, "volumes[0].mount_path", "would hide part of the container"),
    ({"volumes": [{"claim": "d", "mount_path": "/etc/ssl"}]}, "volumes[0].mount_path", "reserved"),
    ({"volumes": [{"claim": "d", "mount_path": "/dev/shm"}]}, "volumes[0].mount_path", "reserved"),
    ({"volumes": [{"claim": "d", "mount_path": "/data", "read_only": "yes"}]}, "volumes[0].read_only", "true or false"),
    (
        {"volumes": [{"claim": "a", "mount_path": "/data"}, {"claim": "b", "mount_path": "/data"}]},
        "volumes[1].mount_path",
        "already the mount path of volumes[0]",
    ),
]


@pytest.mark.parametrize(("overrides", "field", "fragment"), TRAINING_CASES)
def test_training_fields_are_validated(overrides, field, fragment):
    assert_error("training", {**training(), **overrides}, field, fragment)


def test_long_paths_and_a_bad_node_size_are_refused():
    path = "/" + "/".join(["d" * 100] * 11)
    assert_error("training", training(volumes=[{"claim": "d", "mount_path": path}]), "volumes[0].mount_path", "1024")
    with pytest.raises(ValueError, match="gpus_per_node"):
        parse_spec("training", training(), CATALOG, gpus_per_node=0)


def test_a_worker_must_fit_this_clusters_nodes():
    assert_error("training", training(gpus_per_worker=8), "gpus_per_worker", "4 GPUs per node", gpus_per_node=4)
    assert parse_spec("training", training(workers=1, topology="node"), CATALOG).topology == "node"


INFERENCE_CASES = [
    ({"engine": "tgi"}, "engine", "'tgi' is not one of vllm, sglang"),
    ({"image": "vllm/vllm-openai"}, "image", "no tag or digest"),
    ({"model": "../etc/passwd"}, "model", "neither a Hugging Face model id"),
    ({"model": "org/name/extra"}, "model", "neither a Hugging Face model id"),
    ({"model": "org/na me"}, "model", "neither"),
    ({"model": "/models/../x"}, "model", "normalised"),
    (
        {"model": "/data/llama", "weights": {"claim": "w", "mount_path": "/models"}},
        "model",
        "not under the weights volume",
    ),
    ({"tensor_parallel": 0}, "tensor_parallel", "between 1 and 256"),
    ({"pipeline_parallel": 65}, "pipeline_parallel", "between 1 and 64"),
    ({"data_parallel": 2}, "data_parallel", "an SGLang option"),
    ({"tensor_parallel": 12}, "tensor_parallel", "12 GPUs per replica spans nodes of 8 GPUs"),
    (
        {"engine": "sglang", "tensor_parallel": 6, "pipeline_parallel": 2},
        "tensor_parallel",
        "multiple of 8",
    ),
    ({"engine": "sglang", "tensor_parallel": 8, "data_parallel": 2}, "data_parallel", "multi-node SGLang replica"),
    ({"tensor_parallel": 8, "pipeline_parallel": 2, "port": 6379}, "port", "Ray's GCS port"),
    ({"engine": "sglang", "tensor_parallel": 16, "port": 20000}, "port", "SGLang's multi-node init port"),
    ({"replicas": 0}, "replicas", "between 1 and 1000"),
    ({"max_model_len": 8}, "max_model_len", "between 16 and"),
    ({"gpu_memory_utilization": 0}, "gpu_memory_utilization", "above 0 and at most 1, not 0"),
    ({"gpu_memory_utilization": 1.01}, "gpu_memory_utilization", "not 1.01"),
    ({"gpu_memory_utilization": "0.9"}, "gpu_memory_utilization", "must be a number, not a string"),
    ({"gpu_memory_utilization": float("nan")}, "gpu_memory_utilization", "must be a number"),
    ({"port": 0}, "port", "between 1 and 65535"),
    ({"port": 65536}, "port", "between 1 and 65535"),
    ({"readiness": {"initial_delay_s": -1}}, "readiness.initial_delay_s", "between 0 and 7200"),
    ({"readiness": {"period_s": 0}}, "readiness.period_s", "between 1 and 300"),
    ({"readiness": {"delay": 5}}, "readiness.delay", "unknown field"),
    (
        {"shutdown": {"termination_grace_period_s": 30, "drain_seconds": 25}},
        "shutdown.drain_seconds",
        "at most 20, not 25",
    ),
    ({"shutdown": {"drain_seconds": 111}}, "shutdown.drain_seconds", "of the 120 s termination grace period"),
    ({"shutdown": {"termination_grace_period_s": 0}}, "shutdown.termination_grace_period_s", "between 1 and 3600"),
    ({"weights": {"mount_path": "/models"}}, "weights.claim", "required"),
    ({"weights": {"claim": "w", "mount_path": "/proc/x"}}, "weights.mount_path", "reserved"),
    ({"extra_args": ["--port=9000"]}, "extra_args[0]", "--port is set by the console"),
    ({"extra_args": ["--enforce-eager", "-tp", "2"]}, "extra_args[1]", "-tp is set by the console"),
    ({"extra_args": ["--tensor_parallel_size=2"]}, "extra_args[0]", "--tensor-parallel-size is set by the console"),
    ({"engine": "sglang", "extra_args": ["--tp", "2"]}, "extra_args[0]", "--tp is set by the console"),
    ({"engine": "sglang", "extra_args": ["--context-length=4096"]}, "extra_args[0]", "--context-length"),
    ({"extra_args": "--enforce-eager"}, "extra_args", "must be a list of strings"),
    ({"autoscaling": {"enabled": True}}, "autoscaling.max_replicas", "required when autoscaling is enabled"),
    ({"autoscaling": {"enabled": "yes", "max_replicas": 2}}, "autoscaling.enabled", "true or false"),
    (
        {"autoscaling": {"enabled": True, "min_replicas": 0, "max_replicas": 3}},
        "autoscaling.min_replicas",
        "wake from zero",
    ),
    (
        {"autoscaling": {"enabled": True, "min_replicas": 4, "max_replicas": 2}},
        "autoscaling.max_replicas",
        "at least min",
    ),
    ({"autoscaling": {"enabled": True, "min_replicas": 2, "max_replicas": 4}}, "replicas", "within autoscaling's 2..4"),
    ({"autoscaling": {"waiting_threshold": 0}}, "autoscaling.waiting_threshold", "between 1 and"),
    (
        {"autoscaling": {"prometheus_server_address": "http://prom:9090/$(id)"}},
        "autoscaling.prometheus_server_address",
        "not an http(s)://host[:port][/path] URL",
    ),
    ({"autoscaling": {"prometheus_server_address": "ftp://prom"}}, "autoscaling.prometheus_server_address", "URL"),
]


@pytest.mark.parametrize(("overrides", "field", "fragment"), INFERENCE_CASES)
def test_inference_fields_are_validated(overrides, field, fragment):
    assert_error("inference", {**inference(), **overrides}, field, fragment)


# --- derived values, defaults, round trip ------------------------------------------------------------------


def test_training_defaults_and_gpu_counts():
    spec = parse_spec("training", training(), CATALOG)
    assert isinstance(spec, TrainingJobSpec) and spec.kind == "training"
    assert (spec.tier, spec.gang_min, spec.topology, spec.retries, spec.max_runtime_s) == (
        "training",
        4,
        "any",
        3,
        86400,
    )
    assert (spec.total_gpus, spec.gang_gpus) == (32, 32)


@pytest.mark.parametrize(
    ("sharing", "fraction"),
    [
        ({"mode": "mig", "mig_profile": "1g.10gb"}, 1 / 7),
        ({"mode": "mig", "mig_profile": "3g.40gb"}, 3 / 7),
        ({"mode": "time-slice", "replicas": 4}, 0.25),
        ({"mode": "mps", "replicas": 4}, 0.25),
        ({"mode": "mps", "replicas": 3}, 1 / 3),
        ({"mode": "hami", "gpumem_mib": 40_000, "gpucores": 30}, 40_000 / 81_559),  # memory is the larger share
        ({"mode": "hami", "gpumem_mib": 8_000, "gpucores": 50}, 0.5),
    ],
)
def test_fractional_sharing_counts_a_share_of_one_gpu(sharing, fraction):
    spec = parse_spec("training", training(sharing=sharing, gpus_per_worker=1, gang_min=2), CATALOG)
    assert spec.sharing.fraction == pytest.approx(fraction, abs=1e-6)
    assert spec.total_gpus == pytest.approx(4 * fraction, abs=1e-5)
    assert spec.gang_gpus == pytest.approx(2 * fraction, abs=1e-5)


def test_elastic_gang_defaults_to_the_minimum():
    spec = parse_spec(
        "training",
        training(workers=6, elastic={"min_workers": 2, "max_workers": 8, "checkpoint_path": "/ckpt/run-1"}),
        CATALOG,
    )
    assert spec.gang_min == 2 and spec.elastic.max_workers == 8 and spec.gang_gpus == 16


def test_inference_defaults_and_layout():
    spec = parse_spec("inference", inference(), CATALOG)
    assert isinstance(spec, InferenceServiceSpec) and spec.kind == "inference"
    assert spec.image == DEFAULT_IMAGES["vllm"] == "vllm/vllm-openai:v0.11.0"
    assert (spec.tier, spec.readiness.initial_delay_s, spec.autoscaling.min_replicas) == ("online-inference", 600, 1)
    assert (spec.gpus_per_replica, spec.nodes_per_replica, spec.multi_node, spec.total_gpus) == (1, 1, False, 1.0)
    sglang = parse_spec(
        "inference", inference(engine="sglang", tensor_parallel=2, data_parallel=2, replicas=3), CATALOG
    )
    assert sglang.image == "lmsysorg/sglang:v0.5.3"
    assert (sglang.gpus_per_replica, sglang.gpus_per_pod, sglang.total_gpus, sglang.gang_gpus) == (4, 4, 12.0, 4.0)
    big = parse_spec("inference", inference(tensor_parallel=8, pipeline_parallel=2, replicas=2), CATALOG)
    assert (big.gpus_per_replica, big.nodes_per_replica, big.gpus_per_pod, big.multi_node) == (16, 2, 8, True)
    assert (big.total_gpus, big.gang_gpus) == (32.0, 16.0)
    on_fours = parse_spec("inference", inference(tensor_parallel=8), CATALOG, gpus_per_node=4)
    assert (on_fours.nodes_per_replica, on_fours.gpus_per_pod) == (2, 4)


def test_max_gpus_counts_autoscaling_headroom():
    spec = parse_spec(
        "inference", inference(tensor_parallel=4, autoscaling={"enabled": True, "max_replicas": 5}), CATALOG
    )
    assert (spec.total_gpus, spec.max_gpus) == (4.0, 20.0)


ROUND_TRIP = [
    ("inference", inference(routing="cache-aware")),
    (
        "inference",
        inference(
            engine="sglang",
            disaggregation={
                "prefill": {"replicas": 2, "autoscaling": {"enabled": True, "min_replicas": 1, "max_replicas": 4}},
                "decode": {"replicas": 3, "gpus_per_replica": 4},
            },
        ),
    ),
    ("training", training()),
    ("training", training(sharing={"mode": "mig", "mig_profile": "1g.10gb"}, gpus_per_worker=1, workers=7)),
    ("training", training(sharing={"mode": "hami", "gpumem_mib": 10240, "gpucores": 30}, gpus_per_worker=1)),
    ("training", training(sharing={"mode": "time-slice", "replicas": 4}, gpus_per_worker=1, topology="node")),
    ("training", training(sharing={"mode": "mps", "replicas": 8}, gpus_per_worker=1)),
    (
        "training",
        training(
            workers=6,
            elastic={"min_workers": 2, "max_workers": 8, "checkpoint_path": "/ckpt"},
            volumes=[
                {"claim": "ckpt", "mount_path": "/ckpt"},
                {"claim": "data", "mount_path": "/data", "read_only": True},
            ],
            env={"NCCL_DEBUG": "INFO", "WEIRD": "a'b\"$(c)\n"},
            args=["--", "-x", "$HOME"],
            cpu=48,
            memory_gib=400,
            topology="leaf",
            retries=0,
            tolerations=[
                {"key": "dedicated", "value": "training", "effect": "NoSchedule"},
                {"key": "example.com/spot", "operator": "Exists"},
            ],
            secret_env=[{"name": "WANDB_API_KEY", "secret": "wandb", "key": "api-key"}],
        ),
    ),
    ("inference", inference()),
    ("inference", inference(secret_env=[{"name": "HF_TOKEN", "secret": "hf-token", "key": "token"}])),
    (
        "inference",
        inference(
            engine="sglang",
            tensor_parallel=8,
            pipeline_parallel=2,
            max_model_len=32768,
            gpu_memory_utilization=0.85,
            autoscaling={"enabled": True, "min_replicas": 1, "max_replicas": 3, "waiting_threshold": 8},
            weights={"claim": "weights", "mount_path": "/weights"},
            model="/weights/llama-405b",
            extra_args=["--trust-remote-code"],
            shutdown={"termination_grace_period_s": 300, "drain_seconds": 240},
            readiness={"initial_delay_s": 1800, "period_s": 15},
            max_runtime_s=7200,
        ),
    ),
]


@pytest.mark.parametrize(("kind", "data"), ROUND_TRIP)
def test_to_dict_round_trips_through_json_and_parse_spec(kind, data):
    spec = parse_spec(kind, data, CATALOG)
    as_json = json.loads(json.dumps(spec.to_dict()))  # JSON-safe
    assert as_json["kind"] == kind
    assert parse_spec(kind, as_json, CATALOG) == spec
    assert parse_spec(kind, as_json, CATALOG).to_dict() == as_json


@settings(max_examples=60, deadline=None)
@given(
    workers=st.integers(1, 64),
    gpus=st.sampled_from([1, 2, 4, 8]),
    args=st.lists(
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20), max_size=5
    ),
    env=st.dictionaries(
        st.from_regex(r"[A-Z][A-Z0-9_]{0,10}", fullmatch=True).filter(lambda n: not n.startswith(("LWS_", "SLURM_"))),
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20),
        max_size=4,
    ),
)
def test_round_trip_holds_for_arbitrary_arguments(workers, gpus, args, env):
    spec = parse_spec("training", training(workers=workers, gpus_per_worker=gpus, args=args, env=env), CATALOG)
    assert parse_spec("training", json.loads(json.dumps(spec.to_dict())), CATALOG) == spec


def test_sharing_shorthand_and_object_are_the_same():
    a = parse_spec("training", training(sharing="whole"), CATALOG)
    b = parse_spec("training", training(sharing={"mode": "whole"}), CATALOG)
    assert a == b == parse_spec("training", training(), CATALOG)


# --- apply_overrides ---------------------------------------------------------------------------------------------


def test_apply_overrides_merges_dicts_replaces_lists_and_none_deletes():
    base = {
        "name": "tpl",
        "args": ["--a", "1"],
        "env": {"A": "1", "B": "2"},
        "sharing": {"mode": "mig", "mig_profile": "1g.10gb"},
        "elastic": {"min_workers": 1, "max_workers": 4, "checkpoint_path": "/c"},
    }
    merged = apply_overrides(
        base,
        {
            "name": "run-7",
            "args": ["--b"],
            "env": {"B": None, "C": "3"},
            "sharing": {"mig_profile": "3g.40gb"},
            "elastic": None,
        },
    )
    assert merged == {
        "name": "run-7",
        "args": ["--b"],
        "env": {"A": "1", "C": "3"},
        "sharing": {"mode": "mig", "mig_profile": "3g.40gb"},
    }
    assert base["env"] == {"A": "1", "B": "2"} and "elastic" in base  # the template is not modified


def test_apply_overrides_copies_so_results_do_not_share_state():
    base = {"env": {"A": "1"}, "args": ["x"]}
    over = {"volumes": [{"claim": "d", "mount_path": "/d"}]}
    merged = apply_overrides(base, over)
    merged["env"]["A"] = "changed"
    merged["volumes"][0]["claim"] = "changed"
    assert base == {"env": {"A": "1"}, "args": ["x"]} and over["volumes"][0]["claim"] == "d"
    assert apply_overrides({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}  # a dict replaces a scalar
    assert apply_overrides({"a": {"b": 2}}, {"a": 3}) == {"a": 3}
    assert apply_overrides({}, {"missing": None}) == {}


def test_template_with_overrides_is_validated_once_merged():
    template = training(workers=8)
    spec = parse_spec("training", apply_overrides(template, {"name": "run-2", "workers": 2}), CATALOG)
    assert (spec.name, spec.workers, spec.gang_min) == ("run-2", 2, 2)
    assert_error("training", apply_overrides(template, {"workers": 0}), "workers", "between 1")


# --- to_backend_spec ---------------------------------------------------------------------------------------------


def test_backend_spec_of_a_training_job():
    spec = parse_spec("training", training(topology="leaf", args=["--lr", "3e-4"], max_runtime_s=7200), CATALOG)
    backend = to_backend_spec(spec, priority=500)
    assert (backend.name, backend.tenant, backend.queue, backend.tier, backend.priority) == (
        "pretrain",
        "acme",
        "train",
        "training",
        500,
    )
    assert (backend.gpu_model, backend.workers, backend.gpus_per_worker, backend.sharing) == (
        "h100",
        4,
        8,
        Sharing.WHOLE,
    )
    assert (backend.gang_min, backend.topology) == (4, Topology.LEAF)
    # The max runtime is the run's limit; how long the work takes is not the console's to say (the simulator
    # draws it within the limit).
    assert (backend.max_runtime_s, backend.duration_s) == (7200, None)
    assert backend.command == ["python", "train.py", "--lr", "3e-4"]
    assert backend.image == spec.image and backend.total_gpus == spec.total_gpus == 32
    assert backend.labels == {"gpu-console/kind": "training"}


def test_backend_spec_carries_mig_and_fractions():
    mig = parse_spec(
        "training", training(sharing={"mode": "mig", "mig_profile": "3g.40gb"}, gpus_per_worker=1), CATALOG
    )
    backend = to_backend_spec(mig, 100)
    assert (backend.sharing, backend.mig_profile, backend.gpu_fraction) == (
        Sharing.MIG,
        "3g.40gb",
        pytest.approx(3 / 7, abs=1e-6),
    )
    hami = parse_spec(
        "training", training(sharing={"mode": "hami", "gpumem_mib": 8000, "gpucores": 25}, gpus_per_worker=1), CATALOG
    )
    backend = to_backend_spec(hami, 100)
    assert (backend.sharing, backend.gpu_fraction, backend.total_gpus) == (Sharing.HAMI, 0.25, 1.0)
    elastic = parse_spec(
        "training", training(workers=3, elastic={"min_workers": 2, "max_workers": 4, "checkpoint_path": "/c"}), CATALOG
    )
    assert to_backend_spec(elastic, 1).gang_min == 2


def test_backend_spec_of_inference_services():
    single = parse_spec("inference", inference(tensor_parallel=4, replicas=3), CATALOG)
    backend = to_backend_spec(single, 1000)
    assert (backend.workers, backend.gpus_per_worker, backend.gang_min, backend.sharing) == (3, 4, 1, Sharing.WHOLE)
    assert backend.total_gpus == single.total_gpus == 12
    assert (backend.duration_s, backend.max_runtime_s) == (30 * 86400, None)  # runs until cancelled
    assert backend.command[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    multi = parse_spec(
        "inference", inference(tensor_parallel=8, pipeline_parallel=2, replicas=2, max_runtime_s=600), CATALOG
    )
    backend = to_backend_spec(multi, 1000)
    assert (backend.workers, backend.gpus_per_worker, backend.gang_min) == (4, 8, 2)
    assert (backend.duration_s, backend.max_runtime_s) == (30 * 86400, 600)  # until its max runtime stops it
    assert backend.total_gpus == multi.total_gpus == 32


def test_backend_spec_is_accepted_by_the_simulator():
    from apps.backends.simulator.shape import FleetShape
    from apps.backends.simulator.specs import to_request

    shape = FleetShape(nodes=4, gpus_per_node=8, models={"h100": 1.0})
    for kind, data in ROUND_TRIP:
        request = to_request(to_backend_spec(parse_spec(kind, data, CATALOG), 500), shape)
        assert request.model == "h100"


# --- purity ------------------------------------------------------------------------------------------------------


def test_specs_and_renderers_import_without_django():
    code = (
        "import sys; import apps.workloads.specs, apps.backends.render.workload; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'django'); assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(__file__).parents[2]))


@pytest.mark.parametrize("kind", ["training", "inference"])
def test_tolerations_and_secret_references_are_carried_as_given(kind):
    """The console keeps a Secret's reference, never a value: to_dict (what the workload stores) has the names."""
    base = training() if kind == "training" else inference()
    data = {
        **base,
        "tolerations": [
            {"key": "dedicated", "value": "inference", "effect": "NoSchedule"},
            {"key": "example.com/spot", "operator": "Exists"},
            {"key": "dedicated", "value": "inference", "effect": "NoSchedule"},  # the same twice: kept once
        ],
        "secret_env": [{"name": "HF_TOKEN", "secret": "hf-token", "key": "token"}],
    }
    spec = parse_spec(kind, data, CATALOG)
    assert [t.to_dict() for t in spec.tolerations] == [
        {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"},
        {"key": "example.com/spot", "operator": "Exists", "value": "", "effect": ""},
    ]
    stored = spec.to_dict()
    assert stored["secret_env"] == [{"name": "HF_TOKEN", "secret": "hf-token", "key": "token"}]
    assert "HF_TOKEN" not in stored["env"]
    assert parse_spec(kind, training() if kind == "training" else inference(), CATALOG).to_dict()["secret_env"] == []
