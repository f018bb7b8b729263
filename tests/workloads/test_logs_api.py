"""GET /api/v1/workloads/{id}/logs/: the log streamed from the workload's cluster as text (here a simulated one).

Who may read it is the route matrix's (tests/routes/table_api.py: view scope, 404 outside it); here: the answer's
shape, `tail`, `worker` and `follow`, refusals before the first line as the API's JSON errors, and the limits a
followed log is held to.
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from django.db import connection
from django.test import override_settings

from apps.backends.simulator import logs as simulated
from apps.backends.simulator.services import advance_time
from apps.fleet import services as fleet_services
from apps.workloads import logs as workload_logs
from apps.workloads import services
from apps.workloads.models import Workload
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec


def submit(personas, capture, **spec) -> Workload:
    with capture(execute=True):
        created, _ = services.submit_workload(fresh(personas.member_a), kind="training", spec=training_spec(**spec))
    services.reconcile_workloads()
    return Workload.objects.get(pk=created.pk)


@pytest.fixture
def gang(fleet, personas, django_capture_on_commit_callbacks):
    """Two workers of 4 GPUs, running for an hour of simulated time."""
    workload = submit(
        personas,
        django_capture_on_commit_callbacks,
        name="gang",
        workers=2,
        gpus_per_worker=4,
        max_runtime_s=3600,
    )
    assert workload.state == "running", workload.state_reason
    return workload


def read(response) -> str:
    assert response.streaming, response.content
    return b"".join(response.streaming_content).decode()


def logs_url(workload, **query) -> str:
    params = "&".join(f"{k}={v}" for k, v in query.items())
    return f"/api/v1/workloads/{workload.pk}/logs/" + (f"?{params}" if params else "")


def test_every_worker_prefixed_then_one_worker_alone(gang, personas, api):
    advance_time(fresh(personas.platform_admin), gang.cluster, 1)  # 60 s: 20 steps of each worker
    client = api(fresh(personas.member_a))
    response = client.get(logs_url(gang))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Cache-Control"] == "no-store" and response["X-Accel-Buffering"] == "no"
    lines = read(response).splitlines()
    assert lines[0].endswith("submitted: 2 × 4 GPUs")
    workers = {line.split("]")[0] + "]" for line in lines if line.startswith("[worker ")}
    assert workers == {"[worker 0]", "[worker 1]"}
    steps = [line for line in lines if "step " in line]
    assert len(steps) == 40 and all(line.startswith("[worker ") for line in steps)
    assert any(line.startswith("[worker 1] ") and "worker 1 started on" in line for line in lines)
    stamps = [line.split("] ", 1)[-1][:19] for line in lines]
    assert stamps == sorted(stamps)  # one log, in time order

    alone = read(client.get(logs_url(gang, worker=1))).splitlines()
    assert not any(line.startswith("[worker") for line in alone)
    assert sum("step " in line for line in alone) == 20
    assert all("rank 1" in line for line in alone if "step " in line)
    assert not any("worker 0 started" in line for line in alone)


def test_tail_is_per_worker_and_reads_the_same_log_again(gang, personas, api):
    advance_time(fresh(personas.platform_admin), gang.cluster, 2)
    client = api(fresh(personas.member_a))
    whole = read(client.get(logs_url(gang, worker=0))).splitlines()
    last = read(client.get(logs_url(gang, worker=0, tail=5))).splitlines()
    # the job's own lines keep their own last 5; the worker's are its last 5
    assert [line for line in last if "step " in line] == [line for line in whole if "step " in line][-5:]
    assert read(client.get(logs_url(gang, worker=0))).splitlines() == whole  # nothing stored, nothing random
    both = read(client.get(logs_url(gang, tail=3))).splitlines()
    assert sum(line.startswith("[worker 0]") for line in both) == 3
    assert sum(line.startswith("[worker 1]") for line in both) == 3
    assert read(client.get(logs_url(gang, tail=0))) == ""


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"tail": -1}, "tail"),
        ({"tail": 10_001}, "tail"),
        ({"tail": "many"}, "tail"),
        ({"follow": "perhaps"}, "follow"),
        ({"worker": -1}, "worker"),
        ({"worker": "leader"}, "worker"),
        ({"worker": 2}, "worker"),  # the gang has workers 0 and 1
    ],
)
def test_bad_parameters_are_400_naming_the_field(gang, personas, api, query, field):
    response = api(fresh(personas.member_a)).get(logs_url(gang, **query))
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and list(body["fields"]) == [field]


def test_another_tenants_workload_is_not_found_whatever_the_parameters(gang, personas, api):
    client = api(fresh(personas.member_b))
    for query in ({}, {"tail": -1}, {"follow": 1}):
        response = client.get(logs_url(gang, **query))
        assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_a_token_asking_for_text_still_gets_json_errors(gang, personas, api):
    client = api(fresh(personas.member_a))
    response = client.get(logs_url(gang, worker=9), HTTP_ACCEPT="text/plain")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert read(client.get(logs_url(gang), HTTP_ACCEPT="text/plain")).startswith("20")


def test_a_workload_not_on_its_cluster_yet_is_409_with_retry_after(fleet, personas, api):
    created, _ = services.submit_workload(fresh(personas.member_a), kind="training", spec=training_spec())
    response = api(fresh(personas.member_a)).get(logs_url(created))  # the outbox has not run: no backend name
    assert response.status_code == 409
    assert response.json()["code"] == "logs_not_ready" and response["Retry-After"] == "10"


def test_a_cluster_set_not_to_stream_says_where_the_logs_are(gang, personas, api):
    admin = fresh(personas.platform_admin)
    connection = {**gang.cluster.connection, "stream_logs": False, "logs_url": "https://logs.example/w/{name}"}
    fleet_services.update_cluster(admin, gang.cluster, connection=connection)
    response = api(fresh(personas.member_a)).get(logs_url(gang))
    assert response.status_code == 501
    body = response.json()
    assert body["code"] == "logs_not_streamable"
    assert body["detail"] == {"url": f"https://logs.example/w/{gang.backend_name}"}
    assert "connection.stream_logs is false" in body["message"] and body["detail"]["url"] in body["message"]


def test_stream_logs_must_be_a_boolean(fleet, personas):
    cluster = fleet["cluster"]
    with pytest.raises(Exception, match="stream_logs"):
        fleet_services.update_cluster(
            fresh(personas.platform_admin), cluster, connection={**cluster.connection, "stream_logs": "no"}
        )


@pytest.fixture
def fast_polls(monkeypatch):
    monkeypatch.setattr(simulated, "POLL_S", 0.05)


def follow_in_background(response) -> tuple[list[str], threading.Thread]:
    got: list[str] = []

    def consume():
        try:
            for chunk in response.streaming_content:
                got.extend(chunk.decode().splitlines())
        finally:
            connection.close()  # the stream read the simulation on this thread's connection

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    return got, thread


def wait_for(check, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_follow_sends_lines_as_the_job_runs_and_ends_with_it(fleet, personas, fast_polls, api):
    workload = submit(personas, _committed, name="follow", workers=1, gpus_per_worker=8, max_runtime_s=3600)
    response = api(fresh(personas.member_a)).get(logs_url(workload, follow=1, tail=2))
    assert response.status_code == 200
    got, thread = follow_in_background(response)
    admin = fresh(personas.platform_admin)
    wait_for(lambda: any("started" in line for line in got))
    before = len(got)
    advance_time(admin, workload.cluster, 1)  # a simulated minute: 20 more steps
    wait_for(lambda: sum("step " in line for line in got[before:]) >= 20)
    advance_time(admin, workload.cluster, 60 * 24)  # past its end: the stream ends with the run
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert any("stopped on" in line for line in got)
    assert got[-1].split(" ", 1)[1].startswith(("succeeded", "failed", "timed-out"))


@pytest.mark.django_db(transaction=True)
def test_follow_ends_at_the_servers_limit_and_frees_its_slot(fleet, personas, fast_polls, api):
    workload = submit(personas, _committed, name="capped", workers=1, gpus_per_worker=8, max_runtime_s=3600)
    client = api(fresh(personas.member_a))
    with override_settings(LOGS_FOLLOW_MAX_S=1, LOGS_FOLLOW_MAX_STREAMS=1):
        response = client.get(logs_url(workload, follow=1))
        assert response.status_code == 200
        busy = client.get(logs_url(workload, follow=1))
        assert busy.status_code == 429 and busy.json()["code"] == "too_many_log_streams"
        assert busy["Retry-After"] == "30"
        assert client.get(logs_url(workload)).status_code == 200  # reading without follow is not limited
        started = time.monotonic()
        read(response)
        assert time.monotonic() - started < 5  # ended by the limit, the job still running
        again = client.get(logs_url(workload, follow=1))
        assert again.status_code == 200  # the slot was given back
        again.close()
        assert client.get(logs_url(workload, follow=1)).status_code == 200  # and by closing, too


def test_following_every_worker_of_a_big_gang_is_refused(fleet, personas, api, django_capture_on_commit_callbacks):
    workload = submit(personas, django_capture_on_commit_callbacks, name="wide", workers=4, gpus_per_worker=2)
    client = api(fresh(personas.member_a))
    with override_settings(LOGS_FOLLOW_MAX_WORKERS=3):
        refused = client.get(logs_url(workload, follow=1))
        assert refused.status_code == 400 and list(refused.json()["fields"]) == ["worker"]
        assert "limited to 3" in refused.json()["fields"]["worker"][0]
        assert client.get(logs_url(workload)).status_code == 200  # without follow: every worker
        one = client.get(logs_url(workload, follow=1, worker=3))
        assert one.status_code == 200
        one.close()


def test_a_finished_workload_is_read_whole_even_with_follow(gang, personas, api):
    admin = fresh(personas.platform_admin)
    advance_time(admin, gang.cluster, 60 * 24)
    services.reconcile_workloads()
    gang.refresh_from_db()
    assert gang.is_finished
    started = time.monotonic()
    text = read(api(fresh(personas.member_a)).get(logs_url(gang, follow=1)))
    assert time.monotonic() - started < 5
    assert "stopped on" in text


def test_a_stream_that_breaks_says_why_in_its_last_line(gang, personas, api, monkeypatch):
    from apps.backends.base import RetryableBackendError

    def broken(*args, **kwargs):
        yield "first line"
        raise RetryableBackendError("cluster sim: the API server went away")

    monkeypatch.setattr("apps.backends.simulator.backend.SimulatorBackend.stream_logs", broken)
    text = read(api(fresh(personas.member_a)).get(logs_url(gang)))
    assert text == (
        f"first line\n{workload_logs.BROKEN_PREFIX}the log stream broke off: cluster sim: the API server went away\n"
    )


def _committed(execute=True):
    """In a transactional test the submission's on-commit work runs at once: nothing to capture."""
    return contextlib.nullcontext()
