"""`fetch_joined` gives what `select_related(...).get(...)` gives, in one query, null foreign keys included."""

from apps.core.joined import fetch_joined
from apps.workloads import services
from apps.workloads.models import Workload
from apps.workloads.services.submission import REPLAY_RELATED
from tests.utils.personas import fresh
from tests.workloads.conftest import training_spec


def _same(a, b):
    fields = type(b)._meta.concrete_fields
    assert [getattr(a, f.attname) for f in fields] == [getattr(b, f.attname) for f in fields]


def test_fetch_joined_equals_select_related(fleet, personas, django_assert_num_queries):
    workload, _ = services.submit_workload(fresh(personas.member_a), kind="training", spec=training_spec())
    Workload.objects.filter(pk=workload.pk).update(created_by=None)  # a nullable foreign key left empty
    orm = Workload.objects.select_related(*REPLAY_RELATED).get(pk=workload.pk)
    with django_assert_num_queries(1):
        found = fetch_joined(Workload, REPLAY_RELATED, "id", workload.pk)
        _same(found, orm)
        for name in REPLAY_RELATED:
            related, expected = getattr(found, name), getattr(orm, name)
            if expected is None:
                assert related is None, name
            else:
                _same(related, expected)
    assert found.spec == orm.spec and isinstance(found.spec, dict)  # JSON converted as the ORM converts it
    assert found.created_at == orm.created_at and found.created_at.tzinfo is not None
    assert fetch_joined(Workload, REPLAY_RELATED, "id", -1) is None
