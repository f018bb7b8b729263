"""The inference spec's routing and prefill/decode disaggregation (issue 24): what it accepts, each refusal at its
field, what the service holds, and the JSON Schema the submit form is generated from. Pure: no database."""

from __future__ import annotations

import pytest

from apps.backends.shares import SHARE_UNITS
from apps.workloads.specs import json_schema, parse_spec
from apps.workloads.specs.convert import to_backend_spec
from tests.workloads.test_specs import CATALOG, errors, inference

PD = {"prefill": {"replicas": 2}, "decode": {"replicas": 3, "gpus_per_replica": 2}}


def test_defaults_are_todays_round_robin_service():
    spec = parse_spec("inference", inference(), CATALOG)
    assert (spec.routing, spec.disaggregation, spec.routed) == ("round-robin", None, False)
    assert "routing" not in spec.to_dict() and "disaggregation" not in spec.to_dict()


def test_a_split_service_holds_both_pools_gpus():
    spec = parse_spec("inference", inference(engine="sglang", routing="cache-aware", disaggregation=PD), CATALOG)
    assert spec.routed and spec.disaggregation.transfer_backend == "mooncake"  # SGLang's default
    assert spec.total_gpus == 2 * 1 + 3 * 2 and spec.total_units == 8 * SHARE_UNITS
    assert spec.gang_gpus == 2
    scaled = dict(PD, prefill={"replicas": 2, "autoscaling": {"enabled": True, "min_replicas": 1, "max_replicas": 5}})
    assert parse_spec("inference", inference(engine="sglang", disaggregation=scaled), CATALOG).max_gpus == 5 + 6
    backend = to_backend_spec(spec, 500)
    # Pools of 1- and 2-GPU replicas: eight 1-GPU workers (their greatest common divisor), each its own gang.
    assert (backend.workers, backend.gpus_per_worker, backend.gang_min) == (8, 1, 1)
    assert backend.labels["gpu-console/engines"] == "5"


@pytest.mark.parametrize(
    ("overrides", "path", "message"),
    [
        ({"routing": "sticky"}, "routing", "'sticky' is not one of round-robin, cache-aware"),
        (
            {"disaggregation": {**PD, "prefill": {"replicas": 0}}},
            "disaggregation.prefill.replicas",
            "between 1 and 1000",
        ),
        ({"disaggregation": {"prefill": {"replicas": 1}}}, "disaggregation.decode", "required"),
        (
            {"disaggregation": {**PD, "decode": {"replicas": 1, "autoscaling": {"enabled": True, "min_replicas": 2}}}},
            "disaggregation.decode.autoscaling.max_replicas",
            "required when autoscaling is enabled",
        ),
        (
            {
                "disaggregation": {
                    **PD,
                    "decode": {"replicas": 1, "autoscaling": {"enabled": True, "min_replicas": 2, "max_replicas": 3}},
                }
            },
            "disaggregation.decode.replicas",
            "within autoscaling's 2..3",
        ),
        ({"engine": "vllm", "disaggregation": PD}, "disaggregation.transfer_backend", "KV-transfer connector"),
        (
            {"engine": "vllm", "disaggregation": {**PD, "transfer_backend": "mooncake"}},
            "disaggregation.transfer_backend",
            "NixlConnector",
        ),
        ({"pipeline_parallel": 2, "disaggregation": PD}, "pipeline_parallel", "tensor parallel engines"),
        ({"data_parallel": 2, "disaggregation": PD}, "data_parallel", "tensor parallel engines"),
        ({"replicas": 4, "disaggregation": PD}, "replicas", "each pool sets its own"),
        (
            {"autoscaling": {"enabled": True, "max_replicas": 2}, "disaggregation": PD},
            "autoscaling.enabled",
            "each pool scales on its own queue",
        ),
        (
            {"disaggregation": {**PD, "decode": {"replicas": 1, "gpus_per_replica": 16}}},
            "disaggregation.decode.gpus_per_replica",
            "a decode replica runs on one node: at most 8 GPUs, not 16",
        ),
        ({"tensor_parallel": 16, "disaggregation": PD}, "tensor_parallel", "a prefill replica runs on one node"),
        ({"port": 8998, "disaggregation": PD}, "port", "SGLang's disaggregation bootstrap port"),
        (
            {"routing": "cache-aware", "tensor_parallel": 16, "port": 30000},
            "routing",
            "cache-aware routing runs replicas of one node: 16 GPUs per replica span nodes of 8 GPUs",
        ),
        (
            {"engine": "vllm", "port": 5600, "disaggregation": {**PD, "transfer_backend": "nixl"}},
            "port",
            "vLLM's NIXL side channel",
        ),
    ],
)
def test_each_refusal_names_its_field(overrides, path, message):
    found = errors("inference", inference(**{"engine": "sglang", **overrides}))
    assert path in found, found
    assert any(message in m for m in found[path]), found[path]


def test_the_schema_describes_routing_and_both_pools_for_the_form():
    schema = json_schema("inference")
    routing = schema["properties"]["routing"]
    assert routing["enum"] == ["round-robin", "cache-aware"] and routing["x-group"] == "serving"
    assert routing["default"] == "round-robin"
    split = schema["properties"]["disaggregation"]
    assert split["x-group"] == "serving" and split["default"] is None
    pool = schema["$defs"]["PoolModel"]["properties"]
    assert set(pool) == {"replicas", "gpus_per_replica", "autoscaling"} and pool["replicas"]["minimum"] == 1
    backend = schema["$defs"]["DisaggregationModel"]["properties"]["transfer_backend"]
    assert {"enum": ["nixl", "mooncake"], "type": "string"} in backend["anyOf"]
    assert set(schema["$defs"]["DisaggregationModel"]["required"]) == {"prefill", "decode"}
