"""HEALTH_CORDON_INLINE: the health cycle applies the automatic cordon itself, right after the incident, instead of
leaving it to the next free worker; the operation's queued message is still sent and then finds it done."""

import pytest

from apps.audit.models import AuditEvent
from apps.fleet.models import Node
from apps.health.models import Incident
from apps.operations import tasks as operation_tasks
from apps.operations.models import Operation
from apps.operations.runner import execute_operation
from tests.health.conftest import cycle, inject

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch):
    """The operation messages sent to Celery, recorded instead of delivered (no worker runs them here)."""
    sent: list[int] = []
    monkeypatch.setattr(operation_tasks.run_operation_task, "delay", sent.append)
    return sent


def _fault(fleet, capture):
    cluster = fleet["cluster"]
    node = fleet["nodes"][1].name
    cycle(cluster)
    inject(cluster, node, "xid79", 2)
    with capture(execute=True):
        cycle(cluster)
    return node, Operation.objects.get(kind="health.cordon")


def test_the_cycle_cordons_the_node_itself(fleet, settings, queued, django_capture_on_commit_callbacks):
    assert settings.HEALTH_CORDON_INLINE is True  # the default
    node, operation = _fault(fleet, django_capture_on_commit_callbacks)
    assert Node.objects.get(cluster=fleet["cluster"], name=node).unschedulable
    assert operation.status == "succeeded"
    assert Incident.objects.get(cause="xid-79").state == "isolated"
    assert queued == [operation.pk]  # the message went out all the same (a crash mid-cordon leaves it to a worker)
    # ... and its delivery finds the operation done: nothing runs twice, nothing more is audited.
    events = AuditEvent.objects.count()
    assert execute_operation(operation.pk) is False
    assert AuditEvent.objects.count() == events
    assert sum(n.unschedulable for n in Node.objects.filter(cluster=fleet["cluster"])) == 1


def test_without_it_the_cordon_waits_for_a_worker(fleet, settings, queued, django_capture_on_commit_callbacks):
    settings.HEALTH_CORDON_INLINE = False
    node, operation = _fault(fleet, django_capture_on_commit_callbacks)
    assert operation.status == "pending" and queued == [operation.pk]
    assert not Node.objects.get(cluster=fleet["cluster"], name=node).unschedulable
    assert execute_operation(queued[0]) is True  # the worker's delivery
    assert Node.objects.get(cluster=fleet["cluster"], name=node).unschedulable


def test_a_failed_inline_cordon_leaves_the_operation_to_the_worker(
    fleet, queued, monkeypatch, django_capture_on_commit_callbacks
):
    from apps.operations import runner

    def crash(operation_id):
        raise RuntimeError("database went away")

    monkeypatch.setattr(runner, "execute_operation", crash)
    node, operation = _fault(fleet, django_capture_on_commit_callbacks)  # the cycle itself does not fail
    assert operation.status == "pending" and queued == [operation.pk]
    assert not Node.objects.get(cluster=fleet["cluster"], name=node).unschedulable


def test_a_node_goes_to_the_incident_service_as_soon_as_it_is_evaluated(fleet, monkeypatch):
    """Not after the rules ran over the whole fleet: its cordon does not wait for every other node."""
    from apps.health import ingest
    from apps.health.services import incidents

    cluster, nodes = fleet["cluster"], sorted(fleet["nodes"], key=lambda n: n.name)
    cycle(cluster)
    inject(cluster, nodes[0].name, "xid79", 1)
    calls: list[tuple[str, str]] = []
    evaluate, record = ingest.evaluate_gpu, incidents.record_findings

    def evaluating(compiled, node, *args, **kwargs):
        calls.append(("rules", node))
        return evaluate(compiled, node, *args, **kwargs)

    def recording(node_id, *args, **kwargs):
        calls.append(("incident", Node.objects.get(pk=node_id).name))
        return record(node_id, *args, **kwargs)

    monkeypatch.setattr(ingest, "evaluate_gpu", evaluating)
    monkeypatch.setattr(incidents, "record_findings", recording)
    cycle(cluster)
    first_incident = calls.index(("incident", nodes[0].name))
    assert {node for kind, node in calls[:first_incident]} == {nodes[0].name}  # before any other node's rules
    assert {node for kind, node in calls[first_incident:]} == {n.name for n in nodes}


def test_the_cycle_reads_what_it_compares_with_before_the_scrape(fleet, monkeypatch):
    from apps.health import ingest

    calls: list[str] = []
    load_state, collect = ingest.load_state, ingest.collect
    monkeypatch.setattr(ingest, "load_state", lambda *a: calls.append("state") or load_state(*a))
    monkeypatch.setattr(ingest, "collect", lambda *a: calls.append("scrape") or collect(*a))
    cycle(fleet["cluster"])
    assert calls == ["state", "scrape"]
    assert cycle(fleet["cluster"]).nodes == 4 and calls == ["state", "scrape"] * 2


@pytest.mark.parametrize(("took_ms", "again"), [(4_999, False), (5_000, True), (9_000, True)])
def test_a_cycle_that_outlasts_the_interval_starts_the_next_at_once(settings, monkeypatch, took_ms, again):
    """Beat's tick inside a long cycle sends nothing (the cluster's fan-out stamp): the next cycle starts when this
    one ends, not at the next tick (tests/fleet/test_fan_out.py: under the same stamp)."""
    from apps.health import tasks
    from apps.health.ingest import CycleResult

    settings.HEALTH_SCRAPE_INTERVAL_S = 5
    sent: list[int] = []
    monkeypatch.setattr(tasks, "run_cycle", lambda pk: CycleResult(cluster="c", duration_ms=took_ms))
    monkeypatch.setattr(tasks.ingest_cluster_task, "delay", sent.append)
    tasks.ingest_cluster_task(7)
    assert sent == ([7] if again else [])
    monkeypatch.setattr(tasks, "run_cycle", lambda pk: CycleResult(cluster="c", duration_ms=took_ms, skipped=True))
    tasks.ingest_cluster_task(7)  # a skipped delivery (another cycle holds the lease) never chains one
    assert sent == ([7] if again else [])
