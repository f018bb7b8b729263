"""insert_rows: several new rows in one statement, each with its primary key set, as save() would write them."""

from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.core.inserts import insert_rows


def test_rows_go_out_in_one_statement_with_their_keys(db, django_assert_num_queries):
    now = timezone.now()
    first = AuditEvent(time=now, actor_label="a", action="test.one", target_type="t", after={"n": 1})
    second = AuditEvent(time=now, actor_label="b", action="test.two", target_type="t")
    preset = AuditEvent(pk=10_000_001, time=now, actor_label="c", action="test.three", target_type="t")
    with django_assert_num_queries(1):
        insert_rows(first, second, preset)
    assert first.pk and second.pk and first.pk != second.pk and preset.pk == 10_000_001
    stored = {e.pk: e for e in AuditEvent.objects.filter(action__startswith="test.")}
    assert stored[first.pk].after == {"n": 1} and stored[first.pk].time == now
    assert stored[second.pk].actor_label == "b" and stored[preset.pk].action == "test.three"
    assert not first._state.adding and first._state.db == "default"


def test_the_chain_is_parsed_once_per_text(db):
    """psycopg caches its parse of a statement only up to a number of parameters; the chain has more."""
    from psycopg import _queries

    def rows():
        now = timezone.now()
        return [
            AuditEvent(time=now, actor_label="a", action="test.p", target_type="t", before={}, after={}, reason="r")
            for _ in range(6)
        ]

    insert_rows(*rows())
    assert (len(AuditEvent._meta.concrete_fields) - 1) * 6 > 50  # more parameters than psycopg caches by default
    hits = _queries._query2pg.cache_info().hits
    insert_rows(*rows())
    assert _queries._query2pg.cache_info().hits == hits + 1
