"""Partitions: points, rollups and run_versions partitioned per run on PostgreSQL.

``runs.block`` numbers a run's partitions (runcast_server/record/partitions.py). On PostgreSQL
each of the three tables becomes a partitioned table and the table as it was becomes
its ``*_legacy`` partition (renamed and attached, no row copied; attaching checks its
rows against the bound with one sequential scan): ``points`` and ``rollups`` by range
of ``series_id`` (legacy: below 2**40, or past every stored id, after a downgrade and
upgrade), ``run_versions`` by list of ``run_id`` (legacy: the runs that exist now). Every existing run gets block 0 (its rows stay in the legacy
partitions); a new run gets one from the sequence ``run_blocks`` when its first batch is
stored. ``run_versions`` loses its foreign key to ``runs`` on both databases: attaching a
partition clones a foreign key, which takes SHARE ROW EXCLUSIVE on ``runs`` and so waits for
every ingest transaction that has updated a run (``manage.delete_run`` deletes the rows).
SQLite otherwise only gains the column. The downgrade copies the rows back into plain tables.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from psycopg import sql

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

SERIES_BITS = 24  # partitions.SERIES_BITS
FIRST_BLOCK = 1 << 16  # partitions.FIRST_BLOCK
PRIMARY_KEYS = {
    "points": ("series_id", "step"),
    "rollups": ("series_id", "level", "bucket"),
    "run_versions": ("run_id", "version"),
}
FK = "fk_run_versions_run_id_runs"


def _exec(statement: sql.Composable) -> None:
    dbapi = op.get_bind().connection.dbapi_connection
    with dbapi.cursor() as cursor:  # type: ignore[union-attr]
        cursor.execute(statement)


def _ident(name: str) -> sql.Identifier:
    return sql.Identifier(name)


def _columns(table: str) -> sql.Composable:
    return sql.SQL(", ").join(map(_ident, PRIMARY_KEYS[table]))


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("block", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("run_versions") as batch:
        batch.drop_constraint(FK, type_="foreignkey")
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("UPDATE runs SET block = 0")
    top = op.get_bind().execute(sa.text(  # each max() reads one end of a primary key
        "SELECT greatest((SELECT max(id) FROM series), (SELECT max(series_id) FROM points),"
        " (SELECT max(series_id) FROM rollups))"
    )).scalar()
    first = max(FIRST_BLOCK, ((top or 0) >> SERIES_BITS) + 1)
    op.execute(f"CREATE SEQUENCE run_blocks START {first} MINVALUE {first}")
    for table in PRIMARY_KEYS:
        legacy = f"{table}_legacy"
        _exec(sql.SQL("ALTER TABLE {} RENAME TO {}").format(_ident(table), _ident(legacy)))
        _exec(sql.SQL("ALTER TABLE {} RENAME CONSTRAINT {} TO {}").format(
            _ident(legacy), _ident(f"pk_{table}"), _ident(f"pk_{legacy}")))
        key = "RANGE (series_id)" if table != "run_versions" else "LIST (run_id)"
        _exec(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY {}").format(
            _ident(table), _ident(legacy), sql.SQL(key)))
        _exec(sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY ({})").format(
            _ident(table), _ident(f"pk_{table}"), _columns(table)))
    run_ids = list(op.get_bind().execute(sa.text("SELECT id FROM runs ORDER BY id")).scalars())
    bounds = {
        "points": sql.SQL("FROM (MINVALUE) TO ({})").format(sql.Literal(first << SERIES_BITS)),
        "rollups": sql.SQL("FROM (MINVALUE) TO ({})").format(sql.Literal(first << SERIES_BITS)),
        "run_versions": sql.SQL("IN ({})").format(sql.SQL(", ").join(map(sql.Literal, run_ids))),
    }
    for table, bound in bounds.items():
        legacy_table = _ident(f"{table}_legacy")
        # A database without runs (a new one) needs no legacy partition: every run will have a block.
        if run_ids or op.get_bind().execute(sa.text(f"SELECT EXISTS (SELECT FROM {table}_legacy)")).scalar():
            _exec(sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES {}").format(_ident(table), legacy_table, bound))
        else:
            _exec(sql.SQL("DROP TABLE {}").format(legacy_table))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in PRIMARY_KEYS:
            plain = f"{table}_plain"
            _exec(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)").format(
                _ident(plain), _ident(table)))
            _exec(sql.SQL("INSERT INTO {} SELECT * FROM {} ORDER BY {}").format(
                _ident(plain), _ident(table), _columns(table)))
            _exec(sql.SQL("DROP TABLE {}").format(_ident(table)))  # and every partition
            _exec(sql.SQL("ALTER TABLE {} RENAME TO {}").format(_ident(plain), _ident(table)))
            _exec(sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY ({})").format(
                _ident(table), _ident(f"pk_{table}"), _columns(table)))
        op.execute("DROP SEQUENCE run_blocks")
    with op.batch_alter_table("run_versions") as batch:
        batch.create_foreign_key(FK, "runs", ["run_id"], ["id"], ondelete="CASCADE")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("block")
