"""Bulk writes: many rows in few round trips (unnest arrays or COPY on PostgreSQL, multi-row INSERTs on SQLite)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import Any, Final, TypeVar

import psycopg
from sqlalchemy import Connection, Insert, Table, bindparam, func, select
from sqlalchemy.dialects import postgresql, sqlite

D = TypeVar("D")
DialectInsert = postgresql.Insert | sqlite.Insert  # what ``finish`` gets: both spell ON CONFLICT and ``excluded``

_PG_SQL: dict[tuple[str, tuple[str, ...], str], str] = {}  # compiled bulk statements
_SQLITE_STMT: dict[tuple[str, tuple[str, ...], str], Insert] = {}  # built ones (SQLAlchemy compiles each once)
_BINARY_PARAM = re.compile(r"%\((a_\w+)\)s")
SQLITE_ROWS_PER_INSERT: Final = 2000  # rows of one SQLite INSERT (its statement is compiled once and cached)


def bulk_insert(
    conn: Connection,
    table: Table,
    names: Sequence[str],
    columns: Sequence[Sequence[Any]],
    finish: Callable[[DialectInsert], Insert],
) -> Sequence[Sequence[Any]]:
    """Insert rows, given column by column (``columns[i]`` holds ``names[i]``), in few round trips.

    ``finish`` must build the same clause every time it is called from one place
    (its statement is built once per table, columns and ``finish``).

    PostgreSQL: one ``INSERT ... SELECT * FROM unnest(<one array per column>)``
    whatever the row count. SQLite: a multi-row ``INSERT ... VALUES`` per page
    (SQLAlchemy's insertmanyvalues). ``finish`` adds the ``ON CONFLICT`` clause
    and any ``RETURNING``; it gets the statement so it can use ``stmt.excluded``.
    """
    key = (table.name, tuple(names), finish.__qualname__)
    if conn.dialect.name == "postgresql":
        sql = _PG_SQL.get(key)
        if sql is None:
            arrays = [bindparam(f"a_{c}", type_=postgresql.ARRAY(table.c[c].type)) for c in names]
            source = select(func.unnest(*arrays).table_valued(*names).render_derived())
            stmt = finish(postgresql.insert(table).from_select(list(names), source))
            # Arrays travel in binary (%b): parsing them as text costs more than the insert.
            sql = _PG_SQL[key] = _BINARY_PARAM.sub(r"%(\1)b", str(stmt.compile(dialect=conn.dialect)))
        params = {f"a_{c}": list(col) for c, col in zip(names, columns)}
        with _driver(conn, psycopg.Connection).cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if cursor.description else []
    built = _SQLITE_STMT.get(key)
    if built is None:  # built once: constructing it (its ``excluded`` alias above all) costs more than a small batch's insert
        built = _SQLITE_STMT[key] = finish(sqlite.insert(table))
    rows = [dict(zip(names, r)) for r in zip(*columns)]
    result = conn.execute(built, rows)
    return result.all() if result.returns_rows else []


def append_rows(conn: Connection, table: str, names: Sequence[str], pg_types: Sequence[str],
                 rows: Iterable[Sequence[Any]], meanwhile: Callable[[], None] | None = None) -> None:
    """Write rows that cannot conflict with stored ones, in the session's transaction.

    PostgreSQL: ``COPY ... FROM STDIN`` in binary (``pg_types``: the columns' types).
    SQLite: plain INSERTs of ``SQLITE_ROWS_PER_INSERT`` rows each, their parameters in one flat
    list (half the CPU a row of the driver's ``executemany``, which binds and steps a statement
    per row; SQLAlchemy's own multi-row VALUES costs several times more), the rest by
    ``executemany``. Any conflict still raises: nothing is skipped silently.

    ``meanwhile``: this process's next work, which needs no answer from the database. On
    PostgreSQL it runs once the rows are sent and before the COPY's end is waited for, so
    the server stores them (in its own process, on another CPU) while this one computes;
    on SQLite, after the rows are written. If it raises, the COPY is abandoned.
    """
    if conn.dialect.name == "postgresql":
        with (
            _driver(conn, psycopg.Connection).cursor() as cursor,
            cursor.copy(f"COPY {table} ({', '.join(names)}) FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.set_types(list(pg_types))
            write = copy.write_row
            for row in rows:
                write(row)
            if meanwhile is not None:
                meanwhile()
        return
    driver = _driver(conn, sqlite3.Connection)
    width = len(names)
    per = max(1, min(SQLITE_ROWS_PER_INSERT, driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
    head = f"INSERT INTO {table} ({', '.join(names)}) VALUES "
    one = f"({', '.join('?' * width)})"
    flat = list(chain.from_iterable(rows))
    whole = len(flat) // (per * width) * per * width  # in statements of ``per`` rows; the rest by executemany
    lite = driver.cursor()
    try:
        if whole:
            many = head + ",".join([one] * per)
            for start in range(0, whole, per * width):
                lite.execute(many, flat[start:start + per * width])
        if whole < len(flat):
            rest = flat[whole:]
            lite.executemany(head + one, (rest[i:i + width] for i in range(0, len(rest), width)))
    finally:
        lite.close()
    if meanwhile is not None:
        meanwhile()


def sqlite_cursor(conn: Connection) -> sqlite3.Cursor:
    """A cursor of the driver's own connection under ``conn`` (SQLite): reads without a SQLAlchemy row per result."""
    return _driver(conn, sqlite3.Connection).cursor()


def _driver(conn: Connection, kind: type[D]) -> D:
    """The driver's own connection under ``conn`` (psycopg's for COPY and binary arrays,
    sqlite3's for ``executemany`` over an iterable), checked to be of ``kind``."""
    dbapi = conn.connection.dbapi_connection
    if not isinstance(dbapi, kind):
        raise TypeError(f"expected a {kind.__module__}.{kind.__name__} connection, not {type(dbapi).__name__}")
    return dbapi


def is_sqlite(conn: Connection) -> bool:
    return conn.dialect.name == "sqlite"
