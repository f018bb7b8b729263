"""One-row INSERTs without the ORM's per-call query compilation, for the hottest write paths.

`Model.save()` on a new row compiles its INSERT each time (a fraction of a millisecond, but a
submission writes five rows). `insert_row` builds the statement once per model and field set and
binds the values as the ORM does (`pre_save` for auto_now fields, `get_db_prep_save` for JSON and
dates; strings, numbers and integer keys of the right type as they are, which is what the ORM's
conversion would return for them), so the row is the one `save()` would have written. PostgreSQL
and SQLite both return the new id with RETURNING. Signals are not sent: use it only for models
without receivers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from django.db import connections, models, router


@cache
def _statement(model: type[models.Model], vendor: str, columns: tuple[str, ...]) -> str:
    quote = connections[router.db_for_write(model)].ops.quote_name
    table = quote(model._meta.db_table)
    names = ", ".join(quote(c) for c in columns)
    marks = ", ".join(["%s"] * len(columns))
    return f"INSERT INTO {table} ({names}) VALUES ({marks}) RETURNING {quote(model._meta.pk.column)}"  # noqa: S608


# Values of these types go to the database as they are: Django's own conversion would hand them back unchanged.
_AS_IS = (
    (models.CharField, str),
    (models.TextField, str),
    (models.BooleanField, bool),
    (models.FloatField, float),
    (models.IntegerField, int),
    (models.ForeignKey, int),
)


@cache
def _plan(model: type[models.Model]) -> tuple[tuple[models.Field, type | None], ...]:
    """Per concrete field: the type whose values need no conversion (None: convert as `save()` does)."""
    plan = []
    for field in model._meta.concrete_fields:
        auto = getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
        as_is = next((kind for cls, kind in _AS_IS if isinstance(field, cls)), None)
        if isinstance(field, models.ForeignKey) and not isinstance(field.target_field, models.AutoField):
            as_is = None  # a key of another type (a slug, a UUID): let the target field convert it
        plan.append((field, None if auto else as_is))
    return tuple(plan)


def _as_is(value, kind: type | None) -> bool:
    if value is None:
        return kind is not None
    if kind is None or isinstance(value, bool) is not (kind is bool):  # bool is an int, but not for an IntegerField
        return False
    return isinstance(value, kind)


def _bound(obj: models.Model, connection) -> tuple[list[str], list]:
    """The row's columns and their values, as `save()` would bind them (the primary key only when set)."""
    columns, values = [], []
    for field, as_is in _plan(type(obj)):
        value = getattr(obj, field.attname)
        if field.primary_key and value is None:
            continue  # the database hands it out
        if not _as_is(value, as_is):
            value = field.get_db_prep_save(field.pre_save(obj, True), connection)
        columns.append(field.column)
        values.append(value)
    return columns, values


def _prepared(obj: models.Model, connection) -> tuple[str, list]:
    columns, values = _bound(obj, connection)
    return _statement(type(obj), connection.vendor, tuple(columns)), values


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


def insert_rows_and_commit(*objs: models.Model) -> None:
    """`insert_rows`, then COMMIT, sent to PostgreSQL together (psycopg's pipeline mode: one round trip).

    For the outermost transaction only (`connection.in_atomic_block` with no savepoint around it): the caller's
    `transaction.atomic()` then finds the transaction committed (its own commit does nothing) and runs the
    on-commit hooks after it, outside the pipeline. An error of the INSERT or of the COMMIT (a deferred foreign
    key) is raised here as Django's, and the caller's atomic block rolls back what is left, as with its own
    commit. A decision that holds the admission lock until the commit holds it one round trip less."""
    alias = router.db_for_write(type(objs[0]))
    connection = connections[alias]
    if connection.vendor != "postgresql" or len(objs) == 1 or connection.savepoint_ids:
        raise RuntimeError("insert_rows_and_commit: PostgreSQL, several rows, outermost transaction only")
    statements, values = [], []
    for obj in objs:
        sql, row = _prepared(obj, connection)
        statements.append(sql)
        values.extend(row)
    cursor = connection.cursor()
    try:
        with connection.wrap_database_errors:
            with connection.connection.pipeline():
                cursor.execute(_chain(tuple(statements)), values)
                connection.connection.commit()  # queued after the INSERT; the pipeline's sync sends both
            pks = cursor.fetchone()
    finally:
        cursor.close()
    for obj, pk in zip(objs, pks, strict=True):
        _saved(obj, pk, alias)


@dataclass(frozen=True)
class Guard:
    """A condition PostgreSQL checks in the very statement that writes the rows (`insert_rows_if_locked`): a SELECT
    of one row when the rows may be written, of none when not. Its `columns` (their names, in order) are what the
    rows' computed values are taken from."""

    sql: str
    params: tuple
    columns: tuple[str, ...]

    def with_column(self, name: str, sql: str, params: tuple = ()) -> Guard:
        """The same guard with one more column: `sql` over its columns (by name), e.g. a message around a reason."""
        wrapped = f"SELECT g0.*, {sql} AS {name} FROM ({self.sql}) g0"  # noqa: S608
        return Guard(wrapped, (*params, *self.params), (*self.columns, name))  # `sql`'s parameters come first


def insert_rows_if_locked(
    lock_sql: str,
    guard: Guard,
    *objs: models.Model,
    computed: dict[tuple[int, str], str],
    also: dict[str, tuple[str, tuple]] | None = None,
) -> dict | None:
    """Take the lock `lock_sql`, then INSERT `objs` in one statement if `guard` holds; PostgreSQL only.

    Two statements: the transaction-level lock, then `WITH g AS (guard), r0 AS (INSERT … SELECT … FROM g), …`: each
    row is inserted from the guard's row, so either every row is written or (the guard found no row) none. The
    statement takes its snapshot after the lock is granted, so the guard sees everything committed under the lock
    before it, and nothing can come between its read and the writes: they are one statement. `computed` maps (index
    of the row in `objs`, field attname) to the guard column that value is taken from (a reason worked out under the
    lock, the decision's time); each object gets the value written. Primary keys must be set (handed out up front),
    as in `insert_rows`. `also`: more data-modifying statements of the same chain, by name, each with its
    parameters, taking their rows from the guard's `g` (so that they too write only if it holds) and returning one
    value, which the returned row carries under that name (a wake-up flag raised with the rows:
    `apps.core.wakeup.raise_in_statement`).

    Outside a transaction (a request's autocommit connection), BEGIN, the lock, the statement and COMMIT go to
    PostgreSQL in one round trip (psycopg's pipeline mode): the lock is held only while PostgreSQL works, never while
    Python runs or a reply crosses the network. The transaction is opened and closed by statements of its own, so
    neither psycopg's implicit BEGIN nor Django's atomic block costs a message or a wait of its own. Inside a caller's
    transaction (tests, callers in an atomic block) the two statements go one after the other, and the lock is held
    to that transaction's end, as any decision's. Returns the guard's row (column -> value) when the rows were
    written, None when the guard refused: nothing was written (an empty transaction committed, which releases the
    lock).
    """
    alias = router.db_for_write(type(objs[0]))
    connection = connections[alias]
    if connection.vendor != "postgresql":
        raise RuntimeError("insert_rows_if_locked: PostgreSQL only")
    statements, values = [], list(guard.params)
    for index, obj in enumerate(objs):
        columns, row = _bound(obj, connection)
        exprs = []
        for column, value in zip(columns, row, strict=True):
            taken = computed.get((index, _attnames(type(obj))[column]))
            if taken is None:
                exprs.append("%s")
                values.append(value)
            elif taken in guard.columns:
                exprs.append(f"g.{taken}")
            else:
                raise ValueError(f"insert_rows_if_locked: the guard has no column {taken!r}")
        statements.append(_guarded_statement(type(obj), tuple(columns), tuple(exprs)))
    also = also or {}
    for statement, params in also.values():
        statements.append(statement)
        values.extend(params)
    sql = _guarded_chain(guard.sql, tuple(statements))
    if connection.in_atomic_block or not connection.get_autocommit():
        with connection.cursor() as cursor:
            cursor.execute(lock_sql)
            cursor.execute(sql, values)
            found = cursor.fetchone()
    else:
        found = _in_one_round_trip(connection, lock_sql, sql, values)
    if found is None:
        return None
    written = len(objs) + len(also)
    pks, taken = found[: len(objs)], dict(zip(guard.columns, found[written:], strict=True))
    taken.update(zip(also, found[len(objs) : written], strict=True))
    for index, obj in enumerate(objs):
        _saved(obj, pks[index], alias)
    for (index, attname), column in computed.items():
        setattr(objs[index], attname, taken[column])
    return taken


def _in_one_round_trip(connection, lock_sql: str, sql: str, values: list):
    """BEGIN, the lock, `sql` and COMMIT in one pipeline on the autocommit connection; `sql`'s row (None: none).
    An error leaves the server's transaction open and failed (the pipeline skipped the COMMIT): rolled back here,
    so the connection is idle again whatever happened."""
    from psycopg.pq import TransactionStatus

    connection.ensure_connection()
    raw = connection.connection
    try:
        with connection.wrap_database_errors, raw.cursor() as around, raw.cursor() as cursor:
            with raw.pipeline():
                around.execute("BEGIN")
                around.execute(lock_sql)
                cursor.execute(sql, values)
                around.execute("COMMIT")  # the pipeline's one sync, at its end, sends all four
            found = cursor.fetchone()
    finally:
        if raw.pgconn.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            raw.execute("ROLLBACK")
    return found


@cache
def _attnames(model: type[models.Model]) -> dict[str, str]:
    return {f.column: f.attname for f in model._meta.concrete_fields}


@cache
def _guarded_statement(model: type[models.Model], columns: tuple[str, ...], exprs: tuple[str, ...]) -> str:
    quote = connections[router.db_for_write(model)].ops.quote_name
    names = ", ".join(quote(c) for c in columns)
    table, pk = quote(model._meta.db_table), quote(model._meta.pk.column)
    return f"INSERT INTO {table} ({names}) SELECT {', '.join(exprs)} FROM g RETURNING {pk}"  # noqa: S608


@cache
def _guarded_chain(guard: str, statements: tuple[str, ...]) -> str:
    # LIMIT 1: a guard that found several rows must not insert the rows several times.
    ctes = ", ".join(f"r{i} AS ({sql})" for i, sql in enumerate(statements))
    picks = ", ".join(f"(SELECT * FROM r{i})" for i in range(len(statements)))  # noqa: S608
    return f"WITH g AS (SELECT * FROM ({guard}) g1 LIMIT 1), {ctes} SELECT {picks}, g.* FROM g"  # noqa: S608


CHAIN_PARAMS_CACHED = 200
CHAIN_LENGTH_CACHED = 16384


def _cache_the_chain() -> None:
    """Let psycopg reuse its parse of the chain's text.

    psycopg turns a statement's `%s` placeholders into `$n` once per text and caches the result, but
    only for statements of at most 50 parameters and 4,096 characters (it expects longer ones to be one-off bulk
    INSERTs). A submission's chain has 67 and is the same text every time: parsed afresh it cost 0.17 ms of the
    submission's CPU; with the guard of a decision within the guarantee in front (`insert_rows_if_locked`) it is
    about 80 parameters and 5,000 characters, 0.3 ms parsed afresh. The limits are module constants of psycopg's;
    tests/core/test_inserts.py fails if they go away.
    """
    try:
        from psycopg import _queries
    except ImportError:  # the demo's SQLite needs no psycopg
        return
    _queries.MAX_CACHED_STATEMENT_PARAMS = max(_queries.MAX_CACHED_STATEMENT_PARAMS, CHAIN_PARAMS_CACHED)
    _queries.MAX_CACHED_STATEMENT_LENGTH = max(_queries.MAX_CACHED_STATEMENT_LENGTH, CHAIN_LENGTH_CACHED)


_cache_the_chain()


@cache
def _chain(statements: tuple[str, ...]) -> str:
    ctes = ", ".join(f"r{i} AS ({sql})" for i, sql in enumerate(statements))
    picks = ", ".join(f"(SELECT * FROM r{i})" for i in range(len(statements)))  # noqa: S608
    return f"WITH {ctes} SELECT {picks}"
