"""The inbox table's states, and what every step on a row shares: claiming the row, reading
its state, the outcome of a step, reading a body, telling a passing failure from a lasting one.

The life cycle is described in ``inbox.process``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from sqlalchemy import ColumnElement, Connection, Row, bindparam, func, select, update

from runcast_server.inbox.models import InboxRow
from runcast_server.ingest.results import IngestResult

INBOX: Final = InboxRow.__table__
PENDING: Final = "pending"
STORED: Final = "stored"
DONE: Final = "done"
QUARANTINED: Final = "quarantined"
STATES: Final = (PENDING, STORED, DONE, QUARANTINED)
BUSY_RETRY_S: Final = 2.0
MAX_ERROR_CHARS: Final = 2000

Publish = Callable[[IngestResult], None]


@dataclass
class Outcome:
    """What ``process`` did with one inbox row.

    ``state`` is the row's state afterwards (None: no such row). ``retry_in``: seconds
    after which the caller should call again (the database was unreachable, or another
    worker holds the row); None when nothing is left to do here. ``lag_s``: seconds from
    the batch's acceptance to this call's commit of its points (None: this call stored
    none); ``run_ids``: the runs this call changed.
    """

    state: str | None
    points: int = 0
    events: int = 0
    retry_in: float | None = None
    lag_s: float | None = None
    run_ids: list[str] = field(default_factory=list)
    results: list[IngestResult] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "points": self.points, "events": self.events}
        if self.retry_in is not None:
            out["retry_in"] = self.retry_in
        return out


def is_transient(exc: BaseException) -> bool:
    """A database that is down, restarting, unreachable, or a deadlock: retrying may help."""
    from psycopg import InterfaceError as PgInterfaceError
    from psycopg import OperationalError as PgOperationalError
    from sqlalchemy import exc as sa

    if isinstance(exc, (sa.OperationalError, sa.InterfaceError, sa.DisconnectionError, sa.TimeoutError)):
        return True
    if isinstance(exc, sa.DBAPIError) and exc.connection_invalidated:
        return True
    # The bulk writers use psycopg's cursor directly: its errors arrive unwrapped.
    return isinstance(exc, (PgOperationalError, PgInterfaceError))


def parse_body(body: bytes) -> Any:
    """A batch body as JSON (strict: the constants NaN and Infinity are refused, with a ValueError).

    orjson reads it (a batch is the largest thing ingest parses). orjson turns an integer
    outside [-2**63, 2**64) into a float, so a body where a token starts with 20 digits, or
    with a minus and 19, is read by the standard library instead, as is what orjson
    refuses (the error is then the standard library's): the result is always the standard
    library's (integers of any size, lone surrogates, UTF-16 and UTF-32 bodies included).
    """
    digits = b" " + body.translate(_DIGIT_RUNS)
    if _LONG_POSITIVE not in digits and _LONG_NEGATIVE not in digits:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return json.loads(body, parse_constant=_not_json)


# Digits become "0"; a point and a minus stay; anything else becomes a space. A run of digits
# that starts a token (not a fraction) then follows a space or a minus, and bytes.find finds it.
_DIGIT_RUNS: Final = b"".join(b"0" if c in "0123456789" else c.encode() if c in ".-" else b" "
                              for c in map(chr, range(256)))
_LONG_POSITIVE: Final = b" " + b"0" * 20  # >= 10**19: may be 2**64 or more
_LONG_NEGATIVE: Final = b"-" + b"0" * 19  # <= -10**18: may be below -2**63


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON; send non-finite numbers as strings")


_CLAIMED = INBOX.alias("claim")  # made once: an alias's columns cost more to set up than the claim's UPDATE


def claim(conn: Connection, inbox_id: int, expect: str, *, read_body: bool = True, **values: Any) -> Row[Any] | None:
    """Lock the row if it is in state ``expect`` and nobody else holds it, and set ``values``.

    Returns the row's (project_id, body, received_at) as they were (the body only with
    ``read_body`` and when ``values`` do not set it), or None. On
    PostgreSQL the transaction is also made to commit asynchronously (see the module
    docstring): ``set_config`` rides along in the same round trip.
    """
    if conn.dialect.name == "sqlite":
        from runcast_server.ingest.checks import take_write_lock

        take_write_lock(conn)
    shape = (conn.dialect.name, read_body and "body" not in values, tuple(sorted(values)))
    stmt = _CLAIMS.get(shape)
    if stmt is None:
        stmt = _CLAIMS[shape] = _claim_statement(*shape)
    return conn.execute(stmt, {"b_row": inbox_id, "b_expect": expect, **{f"b_{k}": v for k, v in values.items()}}).first()


# claim's UPDATE for each (dialect, read_body, names of the values set): it runs two or three
# times a batch, and building one costs more than running it.
_CLAIMS: dict[tuple[str, bool, tuple[str, ...]], Any] = {}


def _claim_statement(dialect: str, read_body: bool, names: tuple[str, ...]) -> Any:
    """``claim``'s UPDATE for one dialect and one set of values, with bound parameters."""
    locked = (
        select(_CLAIMED.c.id)
        .where(_CLAIMED.c.id == bindparam("b_row"), _CLAIMED.c.state == bindparam("b_expect"))
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    columns: list[ColumnElement[Any]] = [INBOX.c.project_id, INBOX.c.received_at]
    if read_body:
        columns.append(INBOX.c.body)
    if dialect == "postgresql":
        columns.append(func.set_config("synchronous_commit", "off", True))
    values = {name: bindparam(f"b_{name}", type_=INBOX.c[name].type) for name in names}
    return update(INBOX).where(INBOX.c.id == locked).values(attempts=INBOX.c.attempts + 1, **values).returning(*columns)


_STATE: Final = select(INBOX.c.state).where(INBOX.c.id == bindparam("b_row"))


def read_state(conn: Connection, inbox_id: int) -> str | None:
    return conn.execute(_STATE, {"b_row": inbox_id}).scalar()


def describe(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text[:MAX_ERROR_CHARS]
