"""Engine and session management: one place that opens, commits and closes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker


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
            cur.execute("PRAGMA busy_timeout=30000")
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
