"""One-row INSERTs without the ORM's per-call query compilation, for the hottest write paths.

`Model.save()` on a new row compiles its INSERT each time (a fraction of a millisecond, but a
submission writes five rows). `insert_row` builds the statement once per model and field set and
binds the values exactly as the ORM does (`pre_save` for auto_now fields, `get_db_prep_save` for
JSON and dates), so the row is the one `save()` would have written. PostgreSQL and SQLite both
return the new id with RETURNING. Signals are not sent: use it only for models without receivers.
"""

from __future__ import annotations

from functools import cache

from django.db import connections, models, router


@cache
def _statement(model: type[models.Model], vendor: str, columns: tuple[str, ...]) -> str:
    quote = connections[router.db_for_write(model)].ops.quote_name
    table = quote(model._meta.db_table)
    names = ", ".join(quote(c) for c in columns)
    marks = ", ".join(["%s"] * len(columns))
    return f"INSERT INTO {table} ({names}) VALUES ({marks}) RETURNING {quote(model._meta.pk.column)}"  # noqa: S608


def _prepared(obj: models.Model, connection) -> tuple[str, list]:
    model = type(obj)
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and getattr(obj, f.attname) is None)]
    values = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    return _statement(model, connection.vendor, tuple(f.column for f in fields)), values


def _saved(obj: models.Model, pk, alias: str) -> None:
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = alias


def insert_row(obj: models.Model) -> models.Model:
    """INSERT `obj` (a new instance) and set its primary key; returns it, like `save()` would have."""
    alias = router.db_for_write(type(obj))
    connection = connections[alias]
    sql, values = _prepared(obj, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        _saved(obj, cursor.fetchone()[0], alias)
    return obj


def insert_rows(*objs: models.Model) -> None:
    """INSERT several new instances in one statement on PostgreSQL (a chain of data-modifying CTEs).

    A submission writes five rows; five statements cost five round trips and five executions. The rows
    may refer to each other only through primary keys that are already set (handed out up front, e.g.
    by `nextval`): each INSERT sees the values, not the others' rows (PostgreSQL checks the foreign keys,
    which Django declares DEFERRABLE INITIALLY DEFERRED, at commit). Elsewhere, one INSERT per row.
    """
    alias = router.db_for_write(type(objs[0]))
    connection = connections[alias]
    if connection.vendor != "postgresql" or len(objs) == 1:
        for obj in objs:
            insert_row(obj)
        return
    statements, values = [], []
    for obj in objs:
        sql, row = _prepared(obj, connection)
        statements.append(sql)
        values.extend(row)
    with connection.cursor() as cursor:
        cursor.execute(_chain(tuple(statements)), values)
        for obj, pk in zip(objs, cursor.fetchone(), strict=True):
            _saved(obj, pk, alias)


@cache
def _chain(statements: tuple[str, ...]) -> str:
    ctes = ", ".join(f"r{i} AS ({sql})" for i, sql in enumerate(statements))
    picks = ", ".join(f"(SELECT * FROM r{i})" for i in range(len(statements)))  # noqa: S608
    return f"WITH {ctes} SELECT {picks}"
