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
    page = client.get(reverse("workloads:workload_logs", args=[workload.pk]))
    assert page.status_code == 200 and "\n".join(lines) in page.content.decode()  # one line each


def test_configured_log_system_is_a_redirect(workload, personas, client, api):
    admin = fresh(personas.platform_admin)
    fleet_services.update_cluster(
        admin,
        workload.cluster,
        connection={**workload.cluster.connection, "logs_url": "https://logs.example/q?w={name}&t={tenant}&x={queue}"},
    )
    client.force_login(personas.member_a)
    response = client.get(reverse("workloads:workload_logs", args=[workload.pk]))
    assert response.status_code == 302
    assert response["Location"] == f"https://logs.example/q?w={workload.backend_name}&t=a&x=a-train"
    body = api(fresh(personas.member_a)).get(f"/api/v1/workloads/{workload.pk}/").json()
    assert body["logs"]["url"] == response["Location"]
    assert body["logs"]["page"].endswith(f"/workloads/{workload.pk}/logs/")


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
