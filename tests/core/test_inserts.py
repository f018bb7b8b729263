"""insert_rows: several new rows in one statement, each with its primary key set, as save() would write them;
insert_rows_if_locked: the same, written only if a guard read under a lock holds."""

import pytest
from django.db import transaction
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.core.inserts import Guard, insert_rows, insert_rows_if_locked


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


def _events(n: int = 2) -> list[AuditEvent]:
    now = timezone.now()
    return [AuditEvent(time=now, actor_label="a", action="test.guarded", target_type="t") for _ in range(n)]


LOCK = "SELECT pg_advisory_xact_lock(4243)"


def test_guarded_rows_are_written_with_values_the_guard_worked_out(db):
    """The guard's row gives the computed values (a reason worked out under the lock); every row is written."""
    guard = Guard("SELECT 'decided ' || %s::text AS why WHERE %s::integer > 0", ("here", 1), ("why",)).with_column(
        "label", "left(%s || why, 12)", ("label: ",)
    )
    first, second = _events()
    with transaction.atomic():
        taken = insert_rows_if_locked(
            LOCK, guard, first, second, computed={(0, "reason"): "why", (1, "reason"): "label"}
        )
    assert taken == {"why": "decided here", "label": "label: decid"}
    assert (first.reason, second.reason) == ("decided here", "label: decid") and first.pk and second.pk
    stored = dict(AuditEvent.objects.filter(action="test.guarded").values_list("pk", "reason"))
    assert stored == {first.pk: "decided here", second.pk: "label: decid"}


def test_a_refusing_guard_writes_nothing(db):
    guard = Guard("SELECT 'no' AS why WHERE %s::integer > 0", (0,), ("why",))
    with transaction.atomic():
        assert insert_rows_if_locked(LOCK, guard, *_events(), computed={(0, "reason"): "why"}) is None
    assert not AuditEvent.objects.filter(action="test.guarded").exists()


def test_a_guard_of_several_rows_writes_each_row_once(db):
    guard = Guard("SELECT x::text AS why FROM generate_series(1, %s) x", (3,), ("why",))
    with transaction.atomic():
        insert_rows_if_locked(LOCK, guard, *_events(), computed={})
    assert AuditEvent.objects.filter(action="test.guarded").count() == 2


def test_guarded_rows_need_a_column_the_guard_has(db):
    guard = Guard("SELECT 'x' AS why", (), ("why",))
    with transaction.atomic(), pytest.raises(ValueError, match="no column 'how'"):
        insert_rows_if_locked(LOCK, guard, *_events(), computed={(0, "reason"): "how"})


def test_the_guarded_chain_is_parsed_once_per_text(db):
    """A submission's guarded chain (about 5,000 characters, 80 parameters) is past psycopg's default cache limits
    (4,096 characters, 50 parameters): here a longer one."""
    from psycopg import _queries

    padding = "x" * 4200
    guard = Guard(f"SELECT %s::text AS why /* {padding} */", ("y",), ("why",))
    for _attempt in range(2):
        hits = _queries._query2pg.cache_info().hits
        with transaction.atomic():
            insert_rows_if_locked(LOCK, guard, *_events(6), computed={(0, "reason"): "why"})
    assert _queries._query2pg.cache_info().hits == hits + 1
