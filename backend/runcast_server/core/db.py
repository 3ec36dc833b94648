"""Engine and session management: one place that opens, commits and closes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, column, create_engine, event, table, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 30_000  # how long a SQLite writer waits for the write lock


class DatabaseReadOnly(Exception):
    """The database takes no writes (a read-only file or mount, a PostgreSQL standby or
    read-only transactions)."""


def upsert(bind: Connection | Engine | Session, table: Table) -> Any:
    """``INSERT`` for ``bind``'s dialect, with ``on_conflict_do_nothing`` / ``on_conflict_do_update``.

    PostgreSQL and SQLite spell ON CONFLICT alike in SQLAlchemy but through their own
    ``insert`` constructs; every writer that needs it takes it from here.
    """
    engine = bind.get_bind() if isinstance(bind, Session) else bind
    return (postgresql if engine.dialect.name == "postgresql" else sqlite).insert(table)


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL mode, a busy timeout and foreign keys."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: sqlite3.Connection, _record: object) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cur.close()

        return engine
    # A database that cannot be reached fails a request in seconds (503), not after the OS's TCP timeout.
    return create_engine(
        url, pool_pre_ping=True, pool_size=10, max_overflow=20, pool_timeout=10, connect_args={"connect_timeout": 5}
    )


@dataclass(frozen=True)
class Database:
    """One database: its engine and session factory (an ``AppContext`` owns the process's; there is
    no process-wide one: whoever needs a session is handed the ``Database``, or a ``Session``)."""

    engine: Engine
    sessions: sessionmaker[Session]

    @classmethod
    def open(cls, url: str) -> Database:
        engine = make_engine(url)
        return cls(engine, sessionmaker(bind=engine, expire_on_commit=False))

    @contextmanager
    def scope(self) -> Iterator[Session]:
        """A session committed once at the end, rolled back on any error."""
        session = self.sessions()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()


def read_snapshot(session: Session) -> Connection:
    """End ``session``'s transaction and begin one whose reads all see one committed state.

    PostgreSQL: ``REPEATABLE READ``. SQLite (WAL): an explicit ``BEGIN``, because the
    driver opens a transaction only before a write; the snapshot is taken by the first
    read after it. The caller's ``Database.scope`` ends the transaction as usual.
    """
    session.commit()
    if session.get_bind().dialect.name == "postgresql":
        return session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
    conn = session.connection()
    conn.exec_driver_sql("BEGIN")
    return conn


_RUNS = table("runs", column("id"), column("version"))  # core sits below the run record's models
_NOOP_WRITE = update(_RUNS).where(_RUNS.c.id == "").values(version=_RUNS.c.version)  # built once: every batch runs it


def noop_write(conn: Connection) -> None:
    """A write that changes nothing (``UPDATE runs ... WHERE id = ''``) but is a write all the
    same: it takes SQLite's write lock (pysqlite begins the transaction here), and it fails in
    a read-only database or transaction."""
    conn.execute(_NOOP_WRITE)


def is_read_only(exc: DBAPIError) -> bool:
    """Whether the driver refused a write because the database is read-only."""
    orig = exc.orig
    return (getattr(orig, "sqlstate", None) == "25006"  # PostgreSQL: read_only_sql_transaction
            or str(getattr(orig, "sqlite_errorname", "")).startswith("SQLITE_READONLY"))


def check_writable(engine: Engine, timeout_s: float) -> None:
    """A ``noop_write`` in a transaction rolled back at once, waiting at most ``timeout_s`` for
    locks: ``DatabaseReadOnly`` when the database takes no writes, the driver's error otherwise."""
    wait_ms = max(1, int(timeout_s * 1000))
    with engine.connect() as conn:
        sqlite_db = conn.dialect.name == "sqlite"
        try:
            if sqlite_db:
                conn.exec_driver_sql(f"PRAGMA busy_timeout={wait_ms}")
            else:
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = {wait_ms}")
            noop_write(conn)
        except DBAPIError as exc:
            if is_read_only(exc):
                raise DatabaseReadOnly("the database refused a write: it is read-only") from exc
            raise
        finally:
            conn.rollback()
            if sqlite_db:  # the pooled connection's writers wait as long as ever again
                conn.exec_driver_sql(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
