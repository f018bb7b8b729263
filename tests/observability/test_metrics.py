"""/metrics: the console's series parse with prometheus_client, hold the right values, and are access-controlled."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apps.fleet.models import Gpu, GpuModel
from apps.fleet.services import sync_inventory
from apps.workloads import services
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec


def scrape(client, **extra) -> dict:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return {f.name: f for f in text_string_to_metric_families(response.content.decode())}


def samples(families, name, **labels):
    family = families[name]
    return [s for s in family.samples if all(s.labels.get(k) == v for k, v in labels.items())]


@pytest.fixture
def busy(fleet, personas, django_capture_on_commit_callbacks):
    member = fresh(personas.member_a)
    with django_capture_on_commit_callbacks(execute=True):
        services.submit_workload(member, kind="training", spec=training_spec(name="one", workers=1))
        services.submit_workload(member, kind="training", spec=training_spec(name="two", workers=1))
        services.submit_workload(member, kind="training", spec=training_spec(name="three", workers=1))  # over quota
        services.submit_workload(member, kind="training", spec=training_spec(name="huge", gpu_model="a100"))
    services.reconcile_workloads()
    assert sync_inventory(fleet["cluster"].pk).ok  # GPUs now show what runs on them
    return fleet


def test_metrics_hold_workloads_quota_waits_and_fleet(busy, client):
    families = scrape(client)
    assert (
        samples(families, "gpuc_workloads", tenant="a", queue="train", gpu_model="h100", state="running")[0].value == 2
    )
    assert samples(families, "gpuc_workloads", state="pending")[0].value == 1
    quota = {s.labels["kind"]: s.value for s in samples(families, "gpuc_queue_gpus", queue="train", gpu_model="h100")}
    assert quota == {"used": 16, "guaranteed": 16, "borrowed": 0, "lent": 0}
    waits = samples(families, "gpuc_admission_wait_seconds", tenant="a", queue="train")
    count = next(s.value for s in waits if s.name.endswith("_count"))
    buckets = [s.value for s in waits if s.name.endswith("_bucket")]
    assert count == 2 and buckets == sorted(buckets) and buckets[-1] == 2
    rejected = samples(families, "gpuc_rejected_submissions", tenant="a", queue="train")
    assert [(s.labels["reason"], s.value) for s in rejected] == [("quota", 1.0)]  # a100 is not in the queue's quota
    gpus = {s.labels["state"]: s.value for s in samples(families, "gpuc_gpus", gpu_model="h100")}
    assert gpus["allocated"] == 16 and sum(gpus.values()) == Gpu.objects.filter(model__code="h100").count()
    assert samples(families, "gpuc_cluster_up", cluster="sim")[0].value == 1
    assert samples(families, "gpuc_outbox_backlog")[0].value == 0
    assert samples(families, "gpuc_celery_queue_depth", queue="celery")
    submit_calls = samples(families, "gpuc_backend_call_duration_seconds", cluster="sim", operation="submit")
    assert any(s.name.endswith("_count") and s.value >= 2 for s in submit_calls)
    assert samples(families, "gpuc_metrics_collect_errors")[0].value == 0


def test_request_latency_is_recorded_by_view(fleet, client, personas):
    client.force_login(personas.member_a)
    client.get("/workloads/")
    families = scrape(client)
    views = {s.labels["view"] for s in families["gpuc_http_request_duration_seconds"].samples}
    assert "workloads:workload_list" in views


def test_label_values_are_escaped(fleet, client):
    model = GpuModel.objects.create(code='we"ird\\x\nmodel', name="Weird", memory_mib=1)
    Gpu.objects.filter(pk=Gpu.objects.first().pk).update(model=model)
    families = scrape(client)
    assert samples(families, "gpuc_gpus", gpu_model='we"ird\\x\nmodel')


def test_access_needs_an_allowed_address_or_the_token(fleet, client, settings):
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    settings.METRICS_TOKEN = "s3cret-metrics"
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert scrape(client, REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer s3cret-metrics")


def test_health_series_follow_an_xid_79(fleet, client, django_capture_on_commit_callbacks):
    from apps.fleet.models import Node
    from tests.health.conftest import cycle, inject

    cluster = fleet["cluster"]
    node = Node.objects.filter(cluster=cluster, gpu_model__code="h100").order_by("name").first()
    cycle(cluster)
    inject(cluster, node.name, "xid79", 2)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)
    families = scrape(client)
    assert samples(families, "gpuc_open_incidents", severity="fatal")[0].value == 1
    assert samples(families, "gpuc_gpu_health", state="fatal")[0].value == 1
    [used] = samples(families, "gpuc_isolation_budget_used", cluster="sim", pool=node.pool.name)
    [limit] = samples(families, "gpuc_isolation_budget_limit", cluster="sim", pool=node.pool.name)
    assert used.value == 1 and limit.value >= 1
    assert samples(families, "gpuc_telemetry_scrape_duration_seconds", cluster="sim")
    assert samples(families, "gpuc_telemetry_scrape_errors", cluster="sim", kind="unreachable")[0].value == 0
