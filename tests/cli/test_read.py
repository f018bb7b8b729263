"""gpuc's read commands in JSON, parsed and checked against the database: ls, status, why, quota, nodes ls."""

from __future__ import annotations

import pytest

from apps.fleet.models import Node
from apps.tenancy.models import Quota
from apps.workloads.models import Workload
from tests.cli.conftest import write_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def two_workloads(gpuc):
    """One running job holding the queue's 16 guaranteed H100, and one that waits for them."""
    for name, workers in (("holds-all", 2), ("waits", 1)):
        done = gpuc("submit", "-f", write_job(gpuc.home, name, gpus_per_worker=8, workers=workers))
        assert done.code == 0, done
    return Workload.objects.get(name="holds-all"), Workload.objects.get(name="waits")


def test_ls_status_and_why_say_what_the_database_holds(gpuc, two_workloads):
    holds, waits = two_workloads
    listed = gpuc("ls", "-o", "json")
    assert listed.code == 0, listed
    rows = listed.json()
    assert [(r["id"], r["name"], r["state"]) for r in rows] == [
        (w.pk, w.name, w.state) for w in Workload.objects.order_by("-created_at", "-id")
    ]
    pending = gpuc("ls", "--state", "pending", "--tenant", "a", "-o", "json").json()
    assert [r["id"] for r in pending] == [waits.pk]
    assert gpuc("ls", "--tenant", "b", "-o", "json").code == 4  # not a tenant ci-a may see: the API's 400

    status = gpuc("status", waits.pk, "-o", "yaml")
    assert status.code == 0, status
    import yaml

    detail = yaml.safe_load(status.stdout)
    assert (detail["id"], detail["state"], detail["state_reason"]) == (waits.pk, "pending", waits.state_reason)
    assert [e["kind"] for e in detail["events"]] == list(waits.events.values_list("kind", flat=True))

    why = gpuc("why", waits.pk, "-o", "json")
    assert why.code == 0, why
    answer = why.json()
    waits.refresh_from_db()
    assert answer["state"] == "pending" and answer["reason"] == waits.state_reason
    assert "free within guarantee" in answer["reason"]
    assert answer["admission"]["decision"] == waits.admission.decision
    assert answer["admission"]["reason"] == waits.admission.reason
    # The table says the same words as the workload's page (its state reason, then "decision: reason").
    table = gpuc("why", waits.pk)
    assert table.stdout.splitlines()[:3] == [
        f"#{waits.pk} waits (a/train): pending",
        f"  {waits.state_reason}",
        f"  admission: {waits.admission.decision}: {waits.admission.reason}",
    ], table
    claim = waits.admission
    assert (answer["admission"]["reserved_gpus"], answer["admission"]["expected_start"]) == (
        claim.reserved_units,
        claim.expected_start,
    )  # no reservation here (it waits for quota, not for capacity): tests/cli/test_package.py words one
    running = gpuc("why", holds.pk).stdout
    holds.refresh_from_db()
    for placement in holds.placements:
        assert f"placed on {placement['node']} GPUs {','.join(map(str, placement['gpus']))}" in running

    missing = gpuc("status", 999999)
    assert missing.code == 4 and "(HTTP 404" in missing.stderr, missing


def test_quota_and_nodes_ls(gpuc, console, two_workloads):
    quota = gpuc("quota", "--tenant", "a", "-o", "json")
    assert quota.code == 0, quota
    row = quota.json()
    assert len(row) == 1
    stored = Quota.objects.get()
    assert (row[0]["queue"], row[0]["gpu_model"], row[0]["guaranteed"]) == ("a/train", "h100", stored.guaranteed)
    assert row[0]["used"] == 16.0  # the running job's two 8-GPU workers
    table = gpuc("quota", "--tenant", "a").stdout.splitlines()
    assert table[0].split() == ["QUEUE", "MODEL", "GUARANTEED", "USED", "BORROWED", "LENT", "BORROW", "LIMIT",
                                "LEND", "LIMIT", "WEIGHT"]  # fmt: skip
    assert table[1].split()[:4] == ["a/train", "h100", "16", "16"]
    assert gpuc("quota", "--tenant", "b", "-o", "json").json() == []  # none it may see

    nodes = gpuc("nodes", "ls", "--cluster", "sim", "-o", "json")
    assert nodes.code == 0, nodes
    listed = {n["name"]: n for n in nodes.json()}
    assert set(listed) == set(Node.objects.filter(cluster__name="sim").values_list("name", flat=True))
    for node in Node.objects.filter(cluster__name="sim"):
        assert (listed[node.name]["state"], listed[node.name]["gpu_count"]) == (node.state, node.gpu_count)
    ready = gpuc("nodes", "ls", "--state", "ready", "-o", "json").json()
    assert {n["name"] for n in ready} == set(Node.objects.filter(state="ready").values_list("name", flat=True))
    assert gpuc("nodes", "ls", "--cluster", "elsewhere", "-o", "json").json() == []
