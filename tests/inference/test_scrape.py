"""The scrape cycle against real HTTP endpoints and the simulator: samples, staleness, skipped histograms."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from apps.inference.models import ServiceTelemetry, TelemetrySample, TelemetryStatus
from apps.inference.scrape import scrape_services
from tests.inference.conftest import move_to_http_cluster, run_service
from tests.inference.exposition import vllm_text
from tests.inference.http_server import serve
from tests.inference.test_parsing import AFTER, BEFORE
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db


def _telemetry(workload) -> ServiceTelemetry:
    return ServiceTelemetry.objects.get(workload=workload)


def test_two_scrapes_give_quantiles_rates_and_gauges(serving, personas, django_capture_on_commit_callbacks):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    with serve() as server:
        move_to_http_cluster(workload, server.url + "/{namespace}/{service}/{port}/metrics")
        # The queue has no binding on this cluster: the namespace is the tenant's slug, as the renderer picks it.
        path = f"/a/{workload.backend_name}-api/8000/metrics"
        t0 = timezone.now()
        server.routes[path] = vllm_text({"a": BEFORE}, prompt=1000, generation=500)
        assert scrape_services(t0)["ok"] == 1, _telemetry(workload).last_error
        baseline = TelemetrySample.objects.get(workload=workload)  # the first scrape: gauges, no deltas
        assert (baseline.running, baseline.waiting, baseline.replicas, baseline.ttft_p99) == (3, 1, 1, None)
        server.routes[path] = vllm_text({"a": AFTER}, prompt=4000, generation=2000, waiting=7)
        assert scrape_services(t0 + timedelta(seconds=15))["ok"] == 1
    sample = TelemetrySample.objects.filter(workload=workload).latest("time")
    assert sample.ttft_p50 == pytest.approx(0.3125) and sample.ttft_p99 == pytest.approx(0.975)
    assert (sample.requests, sample.ttft_slow) == (100, 0)  # all within the default 2 s target
    assert sample.prompt_tokens_per_s == pytest.approx(200) and sample.tokens_per_s == pytest.approx(100)
    assert (sample.waiting, sample.kv_cache, sample.interval_s) == (7, 0.25, 15)
    telemetry = _telemetry(workload)
    assert telemetry.status == TelemetryStatus.OK and telemetry.source == server.url + path


def test_a_new_replica_counts_from_zero_and_a_restarted_one_resets(
    serving, personas, django_capture_on_commit_callbacks
):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    with serve() as server:
        move_to_http_cluster(workload, server.url + "/{name}")
        path = "/" + workload.backend_name
        t0 = timezone.now()
        server.routes[path] = vllm_text({"a": BEFORE})
        scrape_services(t0)
        # Pod a restarted (its counts went down to [0, 1, 2, 3, 3]); pod b is new.
        server.routes[path] = vllm_text({"a": [0, 1, 2, 3, 3], "b": [0, 0, 0, 0, 2]})
        scrape_services(t0 + timedelta(seconds=15))
    sample = TelemetrySample.objects.filter(workload=workload).latest("time")
    assert (sample.requests, sample.replicas) == (5, 2)
    assert sample.ttft_slow == pytest.approx(2)  # pod b's two observations are past the last finite bound


def test_an_endpoint_that_stops_answering_marks_telemetry_stale_not_the_service(
    serving, personas, django_capture_on_commit_callbacks
):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    with serve() as server:
        move_to_http_cluster(workload, server.url + "/{name}")
        server.routes["/" + workload.backend_name] = vllm_text({"a": BEFORE})
        t0 = timezone.now()
        scrape_services(t0)
        server.stop()  # the engine's port closes: connection refused
        counts = scrape_services(t0 + timedelta(seconds=15))
    assert counts["stale"] == 1 and counts["samples"] == 0
    telemetry = _telemetry(workload)
    assert telemetry.status == TelemetryStatus.STALE and "unreachable" in telemetry.last_error
    assert telemetry.scrape_errors == 1 and telemetry.last_success_at == t0
    workload.refresh_from_db()
    assert workload.state == "running"


@override_settings(INFERENCE_SCRAPE_TIMEOUT_S=1)
def test_an_endpoint_that_hangs_times_out_short_and_is_stale(serving, personas, django_capture_on_commit_callbacks):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    with serve() as server:
        move_to_http_cluster(workload, server.url + "/{name}")
        server.routes["/" + workload.backend_name] = vllm_text({"a": BEFORE})
        server.delay = 3
        counts = scrape_services()
        server.delay = 0
    assert counts["stale"] == 1
    telemetry = _telemetry(workload)
    assert (telemetry.status, telemetry.last_error) == (TelemetryStatus.STALE, "timed out")


def test_a_garbled_histogram_is_skipped_and_counted(serving, personas, django_capture_on_commit_callbacks):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    with serve() as server:
        move_to_http_cluster(workload, server.url + "/{name}")
        path = "/" + workload.backend_name
        t0 = timezone.now()
        server.routes[path] = vllm_text({"a": BEFORE})
        scrape_services(t0)
        server.routes[path] = vllm_text({"a": [10, 60, 110, 140, 140]}).replace('le="+Inf"', 'le="2.0"')
        counts = scrape_services(t0 + timedelta(seconds=15))
        server.routes[path] = vllm_text({"a": AFTER})
        scrape_services(t0 + timedelta(seconds=30))
    assert counts["histogram_errors"] == 1 and counts["ok"] == 1
    telemetry = _telemetry(workload)
    assert telemetry.histogram_errors == 1 and telemetry.status == TelemetryStatus.OK
    garbled, good = TelemetrySample.objects.filter(workload=workload).order_by("time")[1:]
    assert garbled.ttft_p99 is None and garbled.running == 3  # skipped, the rest kept
    # The next good scrape measures from the last good totals, over both intervals.
    assert good.ttft_p50 == pytest.approx(0.3125) and good.requests == 100


def test_overlapping_cycles_scrape_a_service_once(serving, personas, django_capture_on_commit_callbacks):
    workload = run_service(personas, django_capture_on_commit_callbacks)
    now = timezone.now()
    assert scrape_services(now)["services"] == 1
    assert scrape_services(now + timedelta(seconds=2))["services"] == 0  # claimed less than half an interval ago
    assert TelemetrySample.objects.filter(workload=workload).count() == 1


def test_simulated_services_are_read_from_the_simulator(serving, personas, django_capture_on_commit_callbacks):
    vllm = run_service(personas, django_capture_on_commit_callbacks, name="chat")
    sglang = run_service(
        personas,
        django_capture_on_commit_callbacks,
        name="chat-sg",
        engine="sglang",
        autoscaling={"enabled": True, "min_replicas": 1, "max_replicas": 3, "waiting_threshold": 5},
    )
    now = timezone.now()
    scrape_services(now)
    from apps.backends.simulator.services import advance_time

    advance_time(None, serving["cluster"], 10)  # past both services' cold starts (image pull, weights, engine)
    assert scrape_services(now + timedelta(seconds=15))["ok"] == 2
    for workload in (vllm, sglang):
        telemetry = _telemetry(workload)
        assert telemetry.status == TelemetryStatus.OK
        assert telemetry.source == f"/simulator/sim/services/{workload.backend_name}/metrics"
        sample = TelemetrySample.objects.filter(workload=workload).latest("time")
        assert sample.requests > 0 and sample.ttft_p50 > 0 and sample.tpot_p99 > 0
        assert sample.replicas >= 1 and 0 < sample.kv_cache < 1 and sample.tokens_per_s > 0


@pytest.mark.parametrize(
    ("template", "problem"),
    [("ftp://prom/{name}", "http"), ("http://prom/{pod}", "Unknown placeholders ['pod']"), ("http://x/{", "template")],
)
def test_a_bad_metrics_url_template_is_rejected(serving, personas, template, problem):
    from apps.core.errors import InvalidInput
    from apps.fleet.services import update_cluster

    cluster = serving["cluster"]
    connection = {**cluster.connection, "inference_metrics_url": template}
    with pytest.raises(InvalidInput) as caught:
        update_cluster(fresh(personas.platform_admin), cluster, connection=connection)
    assert problem in caught.value.message


def test_a_federation_template_fills_quoted_values_and_literal_braces(
    serving, personas, django_capture_on_commit_callbacks
):
    from apps.inference.sources import source_for

    workload = run_service(personas, django_capture_on_commit_callbacks)
    move_to_http_cluster(workload, 'http://prom:9090/federate?match[]={{namespace="{namespace}",pod=~"{name}-.*"}}')
    source = source_for(workload, "team a")
    assert source.url == f'http://prom:9090/federate?match[]={{namespace="team%20a",pod=~"{workload.backend_name}-.*"}}'


def test_stale_services_and_scrape_errors_reach_the_console_metrics(
    serving, personas, client, django_capture_on_commit_callbacks
):
    from prometheus_client.parser import text_string_to_metric_families

    workload = run_service(personas, django_capture_on_commit_callbacks)
    with serve() as server:
        move_to_http_cluster(workload, server.url + "/{name}")
        server.routes["/" + workload.backend_name] = vllm_text({"a": BEFORE})
        scrape_services(timezone.now())
        server.stop()
        scrape_services(timezone.now() + timedelta(seconds=15))
    text = client.get("/metrics").content.decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    tenant = workload.tenant.slug
    assert samples[("gpuc_inference_services", (("status", "stale"), ("tenant", tenant)))] == 1
    assert samples[("gpuc_inference_scrape_errors_total", (("kind", "scrape"), ("tenant", tenant)))] == 1
