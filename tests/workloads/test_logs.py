"""The logs link: the simulator's own log, a configured log system, or how to read logs on the cluster."""

import pytest
from django.urls import reverse

from apps.backends.simulator.services import advance_time
from apps.fleet import services as fleet_services
from apps.fleet.models import Cluster
from apps.workloads import services
from apps.workloads.logs import logs_for
from apps.workloads.models import Workload
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec


@pytest.fixture
def workload(fleet, personas, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        created, _ = services.submit_workload(
            fresh(personas.member_a), kind="training", spec=training_spec(max_runtime_s=600)
        )
    services.reconcile_workloads()
    return Workload.objects.get(pk=created.pk)


def test_simulated_log_shows_the_run_in_order(workload, personas, client):
    advance_time(fresh(personas.platform_admin), workload.cluster, 120)
    services.reconcile_workloads()
    lines = logs_for(workload).lines
    assert lines[0].endswith(f"submitted to sim as {workload.backend_name}")
    assert any("worker 0 started on" in line and "GPUs 0,1,2,3,4,5,6,7" in line for line in lines)
    assert [line[:19] for line in lines] == sorted(line[:19] for line in lines)
    client.force_login(personas.member_a)
    detail = client.get(reverse("workloads:workload_detail", args=[workload.pk])).content.decode()
    assert reverse("workloads:workload_logs", args=[workload.pk]) in detail


def test_the_logs_page_is_a_live_tail_of_the_endpoint(workload, personas, client):
    """The page holds no log: static/js/workload_logs.js reads the API (tests/e2e/test_workload_logs.py)."""
    client.force_login(personas.member_a)
    page = client.get(reverse("workloads:workload_logs", args=[workload.pk])).content.decode()
    assert f'data-url="/api/v1/workloads/{workload.pk}/logs/"' in page
    assert 'id="log-follow" name="follow" checked' in page  # running: followed
    assert '<option value="0">0</option>' in page and "js/workload_logs.js" in page
    assert 'id="log-labels" type="application/json"' in page
    assert "submitted to sim" not in page


def test_configured_log_system_is_linked_beside_the_live_tail(workload, personas, client, api):
    admin = fresh(personas.platform_admin)
    fleet_services.update_cluster(
        admin,
        workload.cluster,
        connection={**workload.cluster.connection, "logs_url": "https://logs.example/q?w={name}&t={tenant}&x={queue}"},
    )
    client.force_login(personas.member_a)
    response = client.get(reverse("workloads:workload_logs", args=[workload.pk]))
    url = f"https://logs.example/q?w={workload.backend_name}&amp;t=a&amp;x=a-train"
    page = response.content.decode()
    assert response.status_code == 200 and f'href="{url}"' in page and 'data-testid="live-log"' in page
    body = api(fresh(personas.member_a)).get(f"/api/v1/workloads/{workload.pk}/").json()
    assert body["logs"]["url"] == url.replace("&amp;", "&")
    assert body["logs"]["page"].endswith(f"/workloads/{workload.pk}/logs/")
    assert body["logs"]["stream"] == f"http://testserver/api/v1/workloads/{workload.pk}/logs/"


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("ftp://logs.example/{name}", "http"),
        ("https://logs.example/{pod}", "Unknown placeholders ['pod']"),
        ("https://x/{", "Not a valid template"),
    ],
)
def test_bad_logs_url_is_rejected_and_changes_nothing(fleet, personas, template, problem):
    cluster = fleet["cluster"]
    before = dict(cluster.connection)
    with pytest.raises(Exception) as info:
        fleet_services.update_cluster(
            fresh(personas.platform_admin), cluster, connection={**before, "logs_url": template}
        )
    assert problem in str(info.value)
    assert Cluster.objects.get(pk=cluster.pk).connection == before


def test_kubernetes_and_slurm_say_how_to_read_logs(workload):
    workload.cluster.kind = "kubernetes"
    command = logs_for(workload).command
    assert (
        command == f"kubectl logs -n a-train -l gpu-console/workload={workload.pk} --all-containers --prefix --tail=200"
    )
    workload.cluster.kind = "slurm"
    workload.cluster.connection = {"output_dir": "/scratch/logs dir"}
    assert logs_for(workload).command == f"tail -n 200 '/scratch/logs dir/{workload.backend_name}'-*.out"


def test_logs_of_another_tenant_are_not_found(workload, personas, client):
    client.force_login(personas.member_b)
    assert client.get(reverse("workloads:workload_logs", args=[workload.pk])).status_code == 404
