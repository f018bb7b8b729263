"""The simulated exporter over HTTP: /simulator/<cluster>/nodes/<node>/metrics."""

from __future__ import annotations

import pytest
from django.db.models import F
from django.urls import reverse

from apps.backends.models import SimCluster, SimWorkload
from apps.backends.simulator.services import clear_fault, inject_fault
from apps.backends.types import BackendState
from apps.fleet.models import Cluster
from tests.backends.helpers import make_cluster, samples, spec

pytestmark = pytest.mark.django_db

URL = "/simulator/web/nodes/{}/metrics"


@pytest.fixture
def web():
    cluster, backend = make_cluster("web", nodes=2, seed=4)
    backend.submit(spec("serve", gpus_per_worker=2, duration_s=120))
    return cluster, backend


def test_serves_exporter_text_without_authentication(web, client):
    response = client.get(URL.format("gpu-0001"))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    parsed = samples(response.content.decode())
    assert parsed[("DCGM_FI_DEV_GPU_UTIL", "0")][0]["pod"] == "serve-0"
    assert reverse("simulator:node_metrics", kwargs={"cluster": "web", "node": "gpu-0001"}) == URL.format("gpu-0001")


def test_scrape_is_a_few_queries_without_a_lock(web, client, django_assert_max_num_queries):
    with django_assert_max_num_queries(3):  # cluster, node faults, node allocations
        assert client.get(URL.format("gpu-0002")).status_code == 200


def test_unknown_node_cluster_or_kind_is_404(web, client):
    assert client.get(URL.format("gpu-0099")).status_code == 404
    assert b"no node 'gpu-0099'" in client.get(URL.format("gpu-0099")).content
    assert client.get("/simulator/nowhere/nodes/gpu-0001/metrics").status_code == 404
    Cluster.objects.create(name="real", kind="kubernetes")
    assert client.get("/simulator/real/nodes/gpu-0001/metrics").status_code == 404


def test_exporter_down_and_node_down_answer_503_until_cleared(web, client):
    cluster, _ = web
    exporter = inject_fault(None, cluster, "gpu-0001", "exporter-down")
    response = client.get(URL.format("gpu-0001"))
    assert response.status_code == 503 and b"DCGM exporter not answering" in response.content
    assert client.get(URL.format("gpu-0002")).status_code == 200
    clear_fault(None, exporter)
    assert client.get(URL.format("gpu-0001")).status_code == 200
    inject_fault(None, cluster, "gpu-0002", "node-down")
    assert client.get(URL.format("gpu-0002")).status_code == 503


def test_only_get(web, client):
    assert client.post(URL.format("gpu-0001")).status_code == 405


def test_a_scrape_after_a_run_ended_ticks_the_simulation(web, client):
    cluster, _ = web
    # Move the clock without ticking, as real time passing would.
    SimCluster.objects.filter(cluster=cluster).update(clock_offset_s=F("clock_offset_s") + 300)
    response = client.get(URL.format("gpu-0001"))
    assert response.status_code == 200
    assert b"pod=" not in response.content
    assert SimWorkload.objects.get(name="serve").state == BackendState.SUCCEEDED
