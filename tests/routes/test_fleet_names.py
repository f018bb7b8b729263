"""Fleet views name only the work a user may see (issue 20): GPUs, nodes and incidents are every tenant's, what runs
on them is one tenant's. Someone who may not view that tenant reads "another tenant's workload"; console-wide
viewers (platform admins, on-call) read every name. The route matrix proves nothing of B's reaches A's personas;
these prove each side still sees its own names, the mask in their place, and the names to on-call."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from apps.fleet.models import Gpu
from apps.workloads.owners import owners
from tests.routes.matrix import api_client

MASK = "another tenant's workload"


def masked(page: str) -> bool:
    """The mask on a page: printed as a value (escaped) or as the template's own text."""
    return MASK in page or escape(MASK) in page


def _allocated(world, persona: str, side: str) -> set[str]:
    node = world.side(side).busy_node
    body = api_client(world, persona).get(f"/api/v1/gpus/?node={node.name}&page_size=100").json()
    return {gpu["allocated_to"] for gpu in body["results"] if gpu["allocated_to"]}


@pytest.mark.parametrize("persona", ["member_a", "viewer_a", "tenant_admin_a", "token_a"])
def test_a_tenant_sees_its_own_names_and_the_mask_for_others(world, db, persona):
    assert _allocated(world, persona, "own") == {world.own.training.backend_name}
    assert _allocated(world, persona, "foreign") == {MASK}


@pytest.mark.parametrize("persona", ["platform_admin", "oncall"])
def test_console_wide_roles_see_every_name(world, db, persona):
    assert _allocated(world, persona, "foreign") == {world.foreign.training.backend_name}
    assert _allocated(world, persona, "own") == {world.own.training.backend_name}


def test_one_gpu_and_the_pages_mask_alike(world, db):
    gpu = world.foreign.busy_node.gpus.order_by("index").first()
    assert api_client(world, "member_a").get(f"/api/v1/gpus/{gpu.pk}/").json()["allocated_to"] == MASK
    node_page = api_client(world, "member_a").get(f"/fleet/clusters/{world.cluster.name}/nodes/{gpu.node.name}/")
    assert masked(node_page.content.decode())
    health_page = api_client(world, "member_a").get(f"/health/nodes/{gpu.node.pk}/").content.decode()
    assert masked(health_page)
    own_health = api_client(world, "member_a").get(f"/health/nodes/{world.own.busy_node.pk}/").content.decode()
    assert world.own.training.backend_name in own_health and not masked(own_health)
    on_call = api_client(world, "oncall").get(f"/health/nodes/{gpu.node.pk}/").content.decode()
    assert world.foreign.training.backend_name in on_call and not masked(on_call)


def test_an_incident_lists_only_the_work_and_tenants_one_may_see(world, db):
    incident = world.shared_incident
    body = api_client(world, "member_a").get(f"/api/v1/incidents/{incident.pk}/").json()
    assert body["workloads"] == [world.own.service.pk] and body["tenants"] == ["a"]
    body = api_client(world, "oncall").get(f"/api/v1/incidents/{incident.pk}/").json()
    assert sorted(body["workloads"]) == sorted([world.own.service.pk, world.foreign.service.pk])
    assert sorted(body["tenants"]) == ["a", "b"]
    page = api_client(world, "member_a").get(f"/health/incidents/{incident.pk}/").content.decode()
    assert world.own.service.name in page and masked(page)


def test_the_gpu_list_costs_the_same_for_one_gpu_or_many(world, db):
    """The mask is one lookup per answer, not one per GPU."""
    client = api_client(world, "member_a")
    counts = []
    for size in (1, 48):
        client.get(f"/api/v1/gpus/?page_size={size}")
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/api/v1/gpus/?page_size={size}").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def test_owners_attributes_runs_and_pods_of_the_console_only(world, db):
    training = world.own.training
    cluster = training.cluster_id
    run = training.backend_name
    requeued = training.run_name(2)
    names = {
        (cluster, run),
        (cluster, f"{run}-worker-0-abcde"),  # a pod of it
        (cluster, requeued),  # a later run of it
        (cluster, f"wl{training.pk}-someone-else"),  # the id, another name: not it
        (cluster + 1000, run),  # another cluster
        (cluster, "team-x/notebook"),  # work from outside the console
        (cluster, f"{run}x"),
    }
    assert owners(names) == {
        (cluster, run): training.tenant_id,
        (cluster, f"{run}-worker-0-abcde"): training.tenant_id,
        (cluster, requeued): training.tenant_id,
    }


def test_mig_instances_are_masked_too(world, db):
    gpu = world.foreign.busy_node.gpus.order_by("index").first()
    Gpu.objects.filter(pk=gpu.pk).update(
        mig_enabled=True,
        mig_instances=[{"profile": "1g.10gb", "id": 0, "allocated_to": world.foreign.training.backend_name}],
    )
    body = api_client(world, "member_a").get(f"/api/v1/gpus/{gpu.pk}/").json()
    assert body["mig_instances"] == [{"profile": "1g.10gb", "id": 0, "allocated_to": MASK}]
    body = api_client(world, "member_b").get(f"/api/v1/gpus/{gpu.pk}/").json()
    assert body["mig_instances"][0]["allocated_to"] == world.foreign.training.backend_name


def test_the_desired_state_shows_a_tenant_its_own_queues(world, db):
    path = f"/fleet/clusters/{world.cluster.name}/desired-state/"
    mine = api_client(world, "member_a").get(path).content.decode()
    assert "alpha-q" in mine and "bravo-q" not in mine and 'data-testid="partial"' in mine
    every = api_client(world, "oncall").get(path).content.decode()
    assert "alpha-q" in every and "bravo-q" in every and 'data-testid="partial"' not in every


def test_the_masked_names_are_no_sort_key(world, db):
    """Sorting by `allocated_to` would place the masked names among one's own: it is not offered (ignored)."""
    client = api_client(world, "member_a")
    ids = [
        [g["id"] for g in client.get(f"/api/v1/gpus/?page_size=100{o}").json()["results"]]
        for o in ("", "&ordering=-allocated_to")
    ]
    assert ids[0] == ids[1]
