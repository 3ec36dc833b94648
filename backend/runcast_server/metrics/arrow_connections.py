"""ADBC connections to PostgreSQL for the exports (every format), kept open between exports."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Final

from sqlalchemy.engine import make_url

from runcast_server.metrics.series_ref import INDEX_ORDER_PG

KEEP_IDLE: Final = 3  # an export reads on up to three at once (``arrow_pages.adbc_pages``)


class ArrowConnections:
    """Connections that read points straight into Arrow columns (ADBC's PostgreSQL driver, binary COPY).

    Opening one costs about 25 ms (a server process, then the driver reads the type catalogue),
    as much as reading 100,000 points, and an export reads on up to three: so up to ``keep``
    idle ones are kept for the next export. An idle one is checked with ``SELECT 1`` before it
    is handed out again (the server may have closed it); one given back after a failure is
    closed. Each reads in index order (``INDEX_ORDER_PG``) in autocommit mode: a statement is
    its own transaction, so no transaction stays open between the pages of a download.
    Built with the process's state (``AppContext``) and closed with it.
    """

    def __init__(self, database_url: str, keep: int = KEEP_IDLE) -> None:
        self._uri = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
        self._keep = keep
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> Any:
        """A connection (an idle one that still answers, or a new one); hand it back with ``give``."""
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return self._open()
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1")
                    cursor.fetchall()
                return connection
            except Exception:  # closed by the server (a restart, an idle timeout): not handed out
                _close(connection)

    def give(self, connection: Any, ok: bool = True) -> None:
        """Keep ``connection`` for a later export, or close it (after a failure, or beyond ``keep``)."""
        with self._lock:
            if ok and not self._closed and len(self._idle) < self._keep:
                self._idle.append(connection)
                return
        _close(connection)

    def close(self) -> None:
        """Close the idle connections; those given back later are closed then."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            _close(connection)

    def _open(self) -> Any:
        import adbc_driver_postgresql.dbapi

        connection = adbc_driver_postgresql.dbapi.connect(self._uri, autocommit=True)
        try:
            with connection.cursor() as cursor:
                cursor.execute(f"SET {INDEX_ORDER_PG}")  # for the session: every read of this connection
        except BaseException:
            _close(connection)
            raise
        return connection


def _close(connection: Any) -> None:
    with contextlib.suppress(Exception):  # already gone with its server process: nothing left to release
        connection.close()
