"""Two retries with one Idempotency-Key at the same moment, on separate connections: one workload, one claim."""

import threading

import pytest
from django.db import connection

from apps.tenancy.models import Admission
from apps.workloads import services
from apps.workloads.models import Workload
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec


@pytest.mark.django_db(transaction=True)
def test_simultaneous_retries_make_one_workload(fleet, personas):
    barrier = threading.Barrier(4)
    results, errors = [], []

    def submit():
        try:
            barrier.wait(timeout=10)
            results.append(
                services.submit_workload(
                    fresh(personas.member_a), kind="training", spec=training_spec(), idempotency_key="ci-run-77"
                )
            )
        except Exception as exc:  # the assertion below reports it
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    assert len({workload.pk for workload, _ in results}) == 1
    assert sorted(created for _, created in results) == [False, False, False, True]
    assert Workload.objects.count() == 1 and Admission.objects.count() == 1
