"""The expand/contract rule for migrations (docs/deploy-kubernetes.md, "Upgrading without downtime").

During a rolling upgrade the previous release's pods keep serving on the schema the new release's migration Job
has already changed. A migration may therefore only *expand* the schema (add a model, a nullable column, a column
with a database default, an index, a wider field); the old code must find everything it reads and be able to write
every row it writes. Dropping or renaming a column or a model, narrowing a field, SQL that drops or renames, and a
NOT NULL column without `db_default` (the old code's INSERTs leave it out) would break it.

A *contract* migration (dropping what the code stopped using) belongs to the release after the one that stopped
using it. It declares so on its Migration class, which the rule then lets through:

    class Migration(migrations.Migration):
        contract = "drops Node.legacy_label: unused since release 0.4 (tests/deploy/expand_contract.py)"
"""

from __future__ import annotations

import re

from django.db import models
from django.db.migrations import operations as ops
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import ProjectState

# Changes of a column's type that every value of the old type survives and old code still reads the same.
WIDENING = {
    ("CharField", "TextField"),
    ("SmallIntegerField", "IntegerField"),
    ("SmallIntegerField", "BigIntegerField"),
    ("IntegerField", "BigIntegerField"),
    ("PositiveSmallIntegerField", "PositiveIntegerField"),
    ("PositiveSmallIntegerField", "PositiveBigIntegerField"),
    ("PositiveIntegerField", "PositiveBigIntegerField"),
    ("DateField", "DateTimeField"),
}
DESTRUCTIVE_SQL = re.compile(r"\b(DROP|RENAME)\b", re.IGNORECASE)


def narrowing(old: models.Field, new: models.Field, name: str) -> list[str]:
    """How `new` accepts less than `old` ([] when it accepts as much), both the field `name` (an AlterField keeps the
    name: only a `db_column` can move its column). The fields' own `name` is not read: a field of a migration's state
    gets it only when some model is rendered from it, so it depends on what ran before in the process."""
    out = []
    old_type, new_type = old.get_internal_type(), new.get_internal_type()
    if old_type != new_type and (old_type, new_type) not in WIDENING:
        out.append(f"changes its type from {old_type} to {new_type}")
    if old.null and not new.null:
        out.append("becomes NOT NULL")
    if new.max_length is not None and (old.max_length is None or new.max_length < old.max_length):
        out.append(f"max_length {old.max_length} -> {new.max_length}")
    decimals = isinstance(old, models.DecimalField) and isinstance(new, models.DecimalField)
    if decimals and (new.max_digits < old.max_digits or new.decimal_places != old.decimal_places):
        out.append(f"decimal ({old.max_digits}, {old.decimal_places}) -> ({new.max_digits}, {new.decimal_places})")
    if new.unique and not old.unique:
        out.append("becomes unique")
    if (old.db_column or name) != (new.db_column or name):
        out.append(f"renames its column {old.db_column or name} -> {new.db_column or name}")
    return out


def _sql_texts(sql) -> list[str]:
    if isinstance(sql, str):
        return [sql]
    return [item if isinstance(item, str) else item[0] for item in sql]


def operation_problems(app_label: str, operation, state: ProjectState) -> list[str]:
    """Why `operation`, applied to `state`, would break the previous release ([] when it would not)."""
    kind = type(operation).__name__
    if isinstance(operation, ops.RemoveField):
        return [f"{kind} {operation.model_name}.{operation.name}: drops a column the previous release reads"]
    if isinstance(operation, ops.DeleteModel):
        return [f"{kind} {operation.name}: drops a table the previous release reads"]
    if isinstance(operation, ops.RenameField | ops.RenameModel):
        return [f"{kind} {operation.describe()}: the previous release reads the old name"]
    if isinstance(operation, ops.AlterModelTable):
        return [f"{kind} {operation.name}: renames a table the previous release reads"]
    if isinstance(operation, ops.AlterField):
        old = state.models[app_label, operation.model_name_lower].fields[operation.name]
        problems = narrowing(old, operation.field, operation.name)
        return [f"{kind} {operation.model_name}.{operation.name} {why}" for why in problems]
    if isinstance(operation, ops.AddField):
        field = operation.field
        needs_value = not field.many_to_many and not field.null  # a column every INSERT must fill
        if needs_value and field.db_default is models.NOT_PROVIDED:
            return [
                f"{kind} {operation.model_name}.{operation.name}: NOT NULL without db_default "
                "(the previous release's INSERTs leave the column out)"
            ]
        return []
    if isinstance(operation, ops.RunSQL):
        return [
            f"{kind}: {sql.strip()[:80]!r} drops or renames"
            for sql in _sql_texts(operation.sql)
            if DESTRUCTIVE_SQL.search(sql)
        ]
    if isinstance(operation, ops.SeparateDatabaseAndState):
        out = []
        for inner in operation.database_operations:
            out += operation_problems(app_label, inner, state)
            inner.state_forwards(app_label, state)
        return out
    return []


def migration_problems(loader: MigrationLoader, key: tuple[str, str]) -> list[str]:
    """Why migration `key` would break the release before it ([] when it keeps to the rule or is a contract)."""
    migration = loader.graph.nodes[key]
    if getattr(migration, "contract", ""):
        return []
    state = loader.project_state(key, at_end=False)
    out = []
    for operation in migration.operations:
        out += [f"{key[0]}.{key[1]}: {p}" for p in operation_problems(key[0], operation, state.clone())]
        operation.state_forwards(key[0], state)
    return out
