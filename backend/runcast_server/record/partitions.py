"""One partition per run of ``points``, ``rollups`` and ``run_versions`` (PostgreSQL only).

A run gets a block number (``runs.block``, from the sequence ``run_blocks``) when the
first batch of it is stored; the ids of its series are ``block << SERIES_BITS | n``
(n = 1, 2, ...), so its points and rollups fall in one range partition of each table,
and its ``run_versions`` rows go to one list partition (``FOR VALUES IN (run id)``).
Deleting the run detaches those three tables (in the delete's transaction) and then drops
them (in one of their own) instead of deleting their rows.

Runs stored before migration 0013 have block 0: their series keep
ids from the series sequence, below ``FIRST_BLOCK << SERIES_BITS`` (or below the first
block the migration found free), and their rows stay in the ``*_legacy`` partitions. SQLite has no partitions: blocks stay NULL there and
series ids come from the sequence, as before.
"""

from __future__ import annotations

from typing import Any, Final

from psycopg import sql
from sqlalchemy import Connection, Table, text, update

from runcast_server.record.models import Run

SERIES_BITS: Final = 24  # series per run: 2**24 - 1
FIRST_BLOCK: Final = 1 << 16  # the least first block: series ids below 2**40 are legacy
RANGE_TABLES: Final = ("points", "rollups")  # partitioned by series_id
LIST_TABLE: Final = "run_versions"  # partitioned by run_id

_RUNS: Table = Run.__table__


def series_range(block: int) -> tuple[int, int]:
    """The series ids ``[lo, hi)`` of a block: the bounds of its range partitions."""
    return block << SERIES_BITS, (block + 1) << SERIES_BITS


def partition_name(table: str, block: int) -> str:
    return f"{table}_b{block}"


def ensure(conn: Connection, runs: dict[str, Any]) -> dict[str, int | None]:
    """Run id -> block, for rows of ``lock_runs``; gives a block and its partitions to a run without one.

    The runs' rows must be locked (``lock_runs``), so one transaction at a time makes
    a run's partitions; DDL is transactional, so a rolled-back batch leaves none behind.
    A no-op on SQLite.
    """
    blocks: dict[str, int | None] = {rid: row.block for rid, row in runs.items()}
    if conn.dialect.name != "postgresql":
        return blocks
    for rid in sorted(r for r, b in blocks.items() if b is None):
        block = int(conn.execute(text("SELECT nextval('run_blocks')")).scalar_one())
        create(conn, rid, block)
        conn.execute(update(_RUNS).where(_RUNS.c.id == rid).values(block=block))
        blocks[rid] = block
    return blocks


def create(conn: Connection, run_id: str, block: int) -> None:
    """Create and attach the run's three partitions (empty tables: no scan).

    ``CREATE TABLE`` then ``ATTACH PARTITION`` takes SHARE UPDATE EXCLUSIVE on the
    parent, which reads and writes of other runs do not wait for (``CREATE TABLE ...
    PARTITION OF`` would take ACCESS EXCLUSIVE).
    """
    lo, hi = series_range(block)
    bounds = [(t, sql.SQL("FROM ({}) TO ({})").format(sql.Literal(lo), sql.Literal(hi))) for t in RANGE_TABLES]
    bounds.append((LIST_TABLE, sql.SQL("IN ({})").format(sql.Literal(run_id))))
    for table, bound in bounds:
        part = sql.Identifier(partition_name(table, block))
        _run(conn, sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)").format(
            part, sql.Identifier(table)))
        _run(conn, sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES {}").format(
            sql.Identifier(table), part, bound))


def detach(conn: Connection, block: int) -> None:
    """Detach the block's partitions: the run's rows leave the three tables, no row is touched.

    Takes ACCESS EXCLUSIVE on each parent until commit (a catalog change only): it waits
    for reads of that table already running. The detached tables are dropped afterwards,
    in another transaction (``drop_detached``): unlinking gigabytes of files takes seconds,
    and a ``DROP`` of an attached partition would hold the parent that long.
    """
    for table in (*RANGE_TABLES, LIST_TABLE):
        _run(conn, sql.SQL("ALTER TABLE {} DETACH PARTITION {}").format(
            sql.Identifier(table), sql.Identifier(partition_name(table, block))))


def drop_detached(conn: Connection) -> int:
    """Drop every detached partition (a deleted run's, or one a crash left behind); returns how many.

    Holds no lock of the parents. A no-op on SQLite.
    """
    if conn.dialect.name != "postgresql":
        return 0
    names = list(conn.execute(text(
        "SELECT relname FROM pg_class WHERE relkind = 'r' AND NOT relispartition AND pg_table_is_visible(oid)"
        " AND relname ~ '^(points|rollups|run_versions)_b[0-9]+$' ORDER BY relname"
    )).scalars())
    for name in names:
        _run(conn, sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))
    return len(names)


def _run(conn: Connection, statement: sql.Composable) -> None:
    dbapi = conn.connection.dbapi_connection
    with dbapi.cursor() as cursor:  # type: ignore[union-attr]  # None only on a closed connection
        cursor.execute(statement)
