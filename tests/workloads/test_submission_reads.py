"""Issue 23: what rendering at submission needs is read with the submission's context, and equals what
`render_context` reads from the tables on its own (the outbox and the workload page still read it there)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.fleet.models import NodePool
from apps.tenancy.models import QueueBinding
from apps.workloads.models import Workload
from apps.workloads.rendering import render_context, render_tables
from apps.workloads.submission_context import gpu_models, load_context
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec


def post(api, user, spec, key):
    return api(fresh(user)).post(
        "/api/v1/workloads/", {"kind": "training", "spec": spec}, format="json", HTTP_IDEMPOTENCY_KEY=key
    )


@pytest.mark.parametrize("taints", [None, [], [{"key": "dedicated", "value": "train", "effect": "NoSchedule"}]])
def test_the_contexts_render_tables_equal_the_tables(fleet, personas, taints):
    cluster = fleet["cluster"]
    binding = QueueBinding.objects.get(queue=fleet["queue"], cluster=cluster)
    binding.slurm_account = "acct_a"
    binding.save()
    pools = NodePool.objects.filter(cluster=cluster, gpu_model=fleet["h100"])
    if taints is None:
        pools.delete()
    else:
        pools.update(taints=taints)
    context = load_context(personas.member_a.pk, None, training_spec())
    workload = Workload(
        tenant=personas.a, queue=fleet["queue"], cluster=cluster, gpu_model=gpu_models()["h100"], name="x"
    )
    assert context.render_tables[cluster.pk] == render_tables(workload)
    assert context.render_tables[cluster.pk].namespaces == ["a-train"]
    assert context.render_tables[cluster.pk].slurm_account == "acct_a"
    assert context.tenant.archived_at is None
    assert context.clusters[cluster.pk][0].connection == cluster.connection


def test_a_submission_renders_without_reading_the_tables_again(fleet, personas, api):
    with CaptureQueriesContext(connection) as queries:
        response = post(api, personas.member_a, training_spec(), "k1")
    assert response.status_code == 201, response.json()
    sql = " ".join(q["sql"] for q in queries.captured_queries)
    for table in ('FROM "tenancy_queuebinding"', 'FROM "fleet_nodepool"', '"tenancy_tenant"."archived_at" FROM'):
        assert table not in sql, table
    workload = Workload.objects.get(pk=response.json()["id"])
    # What the outbox will render it with (read from the tables) is what submission checked it against.
    assert render_context(workload).namespace == "a-train"


def test_an_archived_tenant_is_still_refused(fleet, personas, api):
    personas.a.archived_at = timezone.now()
    personas.a.save(update_fields=["archived_at"])
    response = post(api, personas.member_a, training_spec(), "k2")
    assert response.status_code == 409 and response.json()["code"] == "archived"
    assert not Workload.objects.exists()
