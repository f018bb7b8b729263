"""One row with its foreign keys, like `select_related(...).get(...)`, without compiling the query each call.

The ORM compiles a query on every call; for a select_related over several wide tables that costs a couple
of milliseconds, more than PostgreSQL takes to answer. `fetch_joined` builds the SQL once per model,
relations and lookup column, and turns the row into the same instances (values converted as the ORM
converts them, the related objects cached on the foreign keys so that reading them runs no query).
"""

from __future__ import annotations

from functools import cache

from django.db import connections, models, router
from django.db.models.expressions import Col


@cache
def _plan(model: type[models.Model], related: tuple[str, ...], column: str, alias: str, extra: tuple[str, ...]):
    connection = connections[alias]
    quote = connection.ops.quote_name
    parts = [(model, "t0", None)]
    joins = []
    for i, name in enumerate(related, start=1):
        fk = model._meta.get_field(name)
        table_alias = f"t{i}"
        kind = "LEFT JOIN" if fk.null else "JOIN"
        target = fk.related_model
        joins.append(
            f"{kind} {quote(target._meta.db_table)} {table_alias} "
            f"ON {table_alias}.{quote(fk.target_field.column)} = t0.{quote(fk.column)}"
        )
        parts.append((target, table_alias, fk))
    columns, converters = [], []
    for part_model, table_alias, _ in parts:
        for field in part_model._meta.concrete_fields:
            columns.append(f"{table_alias}.{quote(field.column)}")
            expression = Col(table_alias, field)
            converters.append(
                (connection.ops.get_db_converters(expression) + field.get_db_converters(connection), expression)
            )
    sql = (
        f"SELECT {', '.join(columns + list(extra))} FROM {quote(model._meta.db_table)} t0 {' '.join(joins)} "  # noqa: S608
        f"WHERE t0.{quote(model._meta.get_field(column).column)} = %s"
    )
    return sql, parts, converters


def fetch_joined(model: type[models.Model], related: tuple[str, ...], column: str, value, extra: tuple[str, ...] = ()):
    """The `model` row whose `column` equals `value` (None if none), with the foreign keys in `related` loaded.

    `extra` are further SQL expressions to select (over the aliases t0 for the model, t1… for `related` in
    order); their values are set on the instance as `joined_extra`.
    """
    alias = router.db_for_read(model)
    connection = connections[alias]
    sql, parts, converters = _plan(model, related, column, alias, extra)
    with connection.cursor() as cursor:
        cursor.execute(sql, [value])
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for i, (functions, expression) in enumerate(converters):
        for convert in functions:
            values[i] = convert(values[i], expression, connection)
    at, instances = 0, []
    for part_model, _, fk in parts:
        fields = part_model._meta.concrete_fields
        chunk = values[at : at + len(fields)]
        at += len(fields)
        instance = part_model.from_db(alias, [f.attname for f in fields], chunk)
        if fk is not None:
            fk.set_cached_value(instances[0], instance if getattr(instances[0], fk.attname) is not None else None)
        instances.append(instance)
    instances[0].joined_extra = values[at:]
    return instances[0]
