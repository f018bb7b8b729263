"""Bulk updates that stay fast at thousands of rows.

Django's `bulk_update` builds one CASE WHEN per field and row, which costs seconds in Python for a
few thousand rows. On PostgreSQL we send `UPDATE ... FROM (VALUES ...)` instead: one statement, the
values bound as parameters. Other databases (the demo's SQLite) use Django's implementation.
"""

from __future__ import annotations

import json

from django.db import connection, models

# PostgreSQL's protocol carries at most 65,535 parameters per statement.
MAX_PARAMS = 65_535


def bulk_update_fast(model: type[models.Model], rows: list[models.Model], fields: list[str]) -> int:
    if not rows:
        return 0
    if connection.vendor != "postgresql":
        return model.objects.bulk_update(rows, fields)
    per_statement = MAX_PARAMS // (len(fields) + 1)  # one statement per this many rows (the pk is a parameter too)
    if len(rows) > per_statement:
        return sum(_update(model, rows[at : at + per_statement], fields) for at in range(0, len(rows), per_statement))
    return _update(model, rows, fields)


def _update(model: type[models.Model], rows: list[models.Model], fields: list[str]) -> int:
    meta = model._meta
    columns, casts = [], []
    for name in fields:
        field = meta.get_field(name)
        columns.append(field.column)
        casts.append(field.db_type(connection))
    pk = meta.pk.column
    placeholders = "(" + ", ".join(["%s::bigint"] + [f"%s::{cast}" for cast in casts]) + ")"
    params: list = []
    for row in rows:
        params.append(row.pk)
        for name in fields:
            value = getattr(row, meta.get_field(name).attname)
            if isinstance(meta.get_field(name), models.JSONField):
                value = json.dumps(value)
            params.append(value)
    assignments = ", ".join(f'"{column}" = v."{column}"' for column in columns)
    value_columns = ", ".join([f'"{pk}"'] + [f'"{column}"' for column in columns])
    # Identifiers come from the model's own metadata, never from input; every value is a bound parameter.
    values_sql = ", ".join([placeholders] * len(rows))
    sql = f'UPDATE "{meta.db_table}" AS t SET {assignments} FROM (VALUES {values_sql}) AS v({value_columns}) '  # noqa: S608
    sql += f'WHERE t."{pk}" = v."{pk}"'
    with connection.cursor() as cursor:
        # Identifiers come from the model's own metadata, never from input; every value is a bound parameter.
        cursor.execute(sql, params)
        return cursor.rowcount
