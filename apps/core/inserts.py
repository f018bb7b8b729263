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


def insert_row(obj: models.Model) -> models.Model:
    """INSERT `obj` (a new instance) and set its primary key; returns it, like `save()` would have."""
    model = type(obj)
    alias = router.db_for_write(model)
    connection = connections[alias]
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and getattr(obj, f.attname) is None)]
    values = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    sql = _statement(model, connection.vendor, tuple(f.column for f in fields))
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        obj.pk = cursor.fetchone()[0]
    obj._state.adding = False
    obj._state.db = alias
    return obj
