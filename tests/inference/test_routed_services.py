"""A routed service (issue 24: cache-aware routing, prefill/decode pools) on the simulator: it places both pools'
GPUs, serves every engine's metrics, and the service page shows the router and each pool."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.urls import reverse

from apps.backends.simulator.exporter import scrape_service
from apps.backends.simulator.services import advance_time
from apps.inference.parsing import parse_engine_metrics
from apps.workloads.views import serving_topology
from tests.inference.conftest import run_service
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db

PD = {"prefill": {"replicas": 1, "gpus_per_replica": 2}, "decode": {"replicas": 3}}


def test_a_disaggregated_service_holds_both_pools_gpus_and_serves_each_engine(
    serving, personas, django_capture_on_commit_callbacks, client
):
    workload = run_service(
        personas, django_capture_on_commit_callbacks, engine="sglang", routing="cache-aware", disaggregation=PD
    )
    assert workload.gpus == 5  # prefill 1 x 2 + decode 3 x 1
    advance_time(None, serving["cluster"], 10)  # past the engines' cold start (image pull, weights, engine start)
    answer = scrape_service(serving["cluster"].name, workload.backend_name)
    assert answer.status == 200
    assert parse_engine_metrics(answer.body, "sglang").replicas == 4  # every prefill and decode engine reports

    client.force_login(fresh(personas.member_a))
    body = client.get(reverse("workloads:workload_detail", args=[workload.pk])).content.decode()
    assert 'data-testid="serving-topology"' in body
    router = body.split('data-testid="router-state">', 1)[1].split("</dd>", 1)[0]
    assert "<code>sglang_router</code>" in router and "<code>cache-aware</code>" in router
    assert "prefill and decode pools" in router and router.endswith("running")
    assert "1 replica × 2 GPUs · running" in body.split('data-testid="pool-prefill">', 1)[1].split("</dd>", 1)[0]
    assert "3 replicas × 1 GPUs · running" in body.split('data-testid="pool-decode">', 1)[1].split("</dd>", 1)[0]


def test_a_plain_service_has_no_topology_and_a_cache_aware_one_has_one_pool():
    plain = SimpleNamespace(spec={"engine": "vllm", "replicas": 2}, state="running")
    assert serving_topology(plain) is None
    routed = SimpleNamespace(spec={"engine": "vllm", "replicas": 2, "routing": "cache-aware"}, state="pending")
    assert serving_topology(routed) == {
        "router": "vllm-router",
        "routing": "cache-aware",
        "pd": False,
        "state": "pending",
        "pools": [{"role": "server", "replicas": 2, "gpus": 1}],
    }
