"""A GPU fault handled by the health app credits the tenant through chargeback, linked to the incident."""

from fractions import Fraction

import pytest

from apps.backends.models import SimAllocation
from apps.backends.registry import get_backend
from apps.chargeback.credits import settle_credits
from apps.chargeback.fractions import exact_seconds
from apps.chargeback.metering import meter_cluster
from apps.chargeback.models import Credit, CreditState
from apps.health.models import Incident
from apps.workloads.services import reconcile_workloads, submit_workload
from tests.health.conftest import cycle, inject, training_spec
from tests.utils.personas import fresh
from tests.utils.simulator import runs_to_the_end

pytestmark = pytest.mark.django_db


def test_a_job_killed_by_xid79_is_credited_with_its_incident(fleet, personas, django_capture_on_commit_callbacks):
    cluster = fleet["cluster"]
    with django_capture_on_commit_callbacks(execute=True):
        workload, _ = submit_workload(fresh(personas.member_a), kind="training", spec=training_spec())
    reconcile_workloads()
    workload.refresh_from_db()
    runs_to_the_end(workload)
    killed_run = workload.backend_name
    get_backend(cluster).advance(1200)  # it has run 20 minutes when the GPU falls off the bus
    node, gpu = workload.placements[0]["node"], workload.placements[0]["gpus"][0]
    cycle(cluster)
    inject(cluster, node, "xid79", gpu)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster)
    incident = Incident.objects.get(cause="xid-79")
    credit = Credit.objects.get(backend_id=killed_run)
    assert credit.workload == workload and credit.tenant == personas.a and credit.state == CreditState.PENDING
    assert credit.incident_ref == f"#{incident.pk}" and credit.incident_url == f"/health/incidents/{incident.pk}/"
    meter_cluster(cluster.pk)
    assert settle_credits() == 1
    credit.refresh_from_db()
    run = SimAllocation.objects.get(workload__name=killed_run)
    assert Fraction(credit.gpu_seconds) == exact_seconds(run.ended_at - run.started_at) * 8
    assert credit.gpu_seconds >= 1200 * 8
