"""Export of a run's raw points as JSONL, CSV or Parquet, streamed page by page.

Every row has the step's wall time (``time``, epoch seconds: ``metrics.step_times``); the
``_timestamp`` series those times come from is exported only when asked for by name.

CSV cells that hold text (metric names) are neutralised against formula injection;
numbers (negative ones included) and the ``NaN``/``Infinity``/``-Infinity`` markers are
written as they are. JSONL is exact. Both are written by orjson a page at a time
(``export_text``).

Each page is one keyset query (``step > last step seen``) in a short session of its
own, so memory stays constant and no read transaction is held open for the whole
download, however many points the run has. JSONL and CSV pages are read through the
DB-API cursor (at a million points SQLAlchemy's row objects would cost more than the
database does); Parquet's too on SQLite, into Arrow columns (``export_parquet``: ADBC on PostgreSQL),
where a page whose steps are all stored is read as its values alone (``DensePage``).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from typing import Any, Final, Literal, overload

from runcast.wire.events import TIMESTAMP_KEY
from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.core.db import Database
from runcast_server.core.errors import NotFound
from runcast_server.metrics.arrow_connections import ArrowConnections
from runcast_server.metrics.export_text import PageWriter, Row
from runcast_server.metrics.series_ref import INDEX_ORDER_PG, DensePage, SeriesRef
from runcast_server.metrics.step_times import TimePoints, time_points
from runcast_server.record.models import Point, Run, Segment, Series

ExportFormat = Literal["jsonl", "csv", "parquet"]
COLUMNS: Final = ("segment", "key", "step", "value", "time")
MEDIA_TYPES: Final = {
    "jsonl": "application/x-ndjson",
    "csv": "text/csv; charset=utf-8",
    "parquet": "application/vnd.apache.parquet",
}
PAGE_ROWS: Final = 1 << 15  # about 3 MB of JSONL
PARQUET_PAGE_ROWS: Final = 1 << 17  # one Parquet row group


def series_to_export(session: Session, run: Run, key: str | None) -> list[SeriesRef]:
    """The run's series (of one key, if given; ``_timestamp`` only by name) in (segment, key)
    order, each with its segment's times; ``NotFound`` for an unknown key."""
    query = (
        select(Series.id, Segment.index, Series.key)
        .join(Segment, Segment.id == Series.segment_id)
        .where(Series.run_id == run.id)
        .order_by(Segment.index, Series.key)
    )
    if key is not None:
        query = query.where(Series.key.in_(sorted({key, TIMESTAMP_KEY})))
    rows = session.execute(query).all()
    times = {seg: i for i, seg, k in rows if k == TIMESTAMP_KEY}
    wanted = key or ""
    refs = [SeriesRef(id=i, segment=seg, key=k, times=times.get(seg)) for i, seg, k in rows
            if k == wanted or (key is None and k != TIMESTAMP_KEY)]
    if key is not None and not refs:
        raise NotFound(f"metric {key!r}", field="key")
    return refs


def _keyset_sql(connection: Any, ref: SeriesRef, columns: tuple[Any, ...], after: int, hi: int | None, limit: int) -> str:
    query = select(*columns).where(Point.series_id == ref.id, Point.step > after)
    if hi is not None:
        query = query.where(Point.step <= hi)
    if ref.upto is not None:
        query = query.where(Point.version <= ref.upto)
    return str(query.order_by(Point.step).limit(limit).compile(connection, compile_kwargs={"literal_binds": True}))


def _dense_values(cursor: Any, connection: Any, ref: SeriesRef, after: int, page_rows: int) -> DensePage | None:
    """The next page's values alone when every step after ``after`` up to the page's end is stored."""
    if ref.upto is not None:
        return None
    cursor.execute(f"SELECT max(step) FROM points WHERE series_id = {int(ref.id)}")  # the primary key's last entry
    last = cursor.fetchone()[0]
    if last is None or last <= after:
        return DensePage(after + 1, [])
    hi = min(after + page_rows, last)
    cursor.execute(_keyset_sql(connection, ref, (Point.value,), after, hi, page_rows))
    values: list[tuple[float | None]] = cursor.fetchall()
    # Steps are unique integers: hi - after rows in (after, hi] are every step there.
    return DensePage(after + 1, values) if len(values) == hi - after else None


@overload
def series_pages(
    database: Database, ref: SeriesRef, page_rows: int, dense: Literal[False] = False
) -> Iterator[tuple[list[Row], TimePoints]]: ...
@overload
def series_pages(
    database: Database, ref: SeriesRef, page_rows: int, dense: Literal[True]
) -> Iterator[tuple[list[Row] | DensePage, TimePoints]]: ...
def series_pages(
    database: Database, ref: SeriesRef, page_rows: int, dense: bool = False
) -> Iterator[tuple[list[Row], TimePoints]] | Iterator[tuple[list[Row] | DensePage, TimePoints]]:
    """The series' ``(step, value)`` rows in step order, ``page_rows`` per list (NULL = NaN), each
    page with the time points of its steps (``step_times.time_points``). With ``dense``, a page
    whose steps are all stored comes as a ``DensePage`` (its values without steps: no Python int
    nor pair per point; the same rows and pages otherwise)."""
    after = -1
    while True:
        with database.scope() as session:
            connection = session.connection()
            cursor = connection.connection.cursor()
            try:
                if connection.dialect.name == "postgresql":
                    cursor.execute(f"SET LOCAL {INDEX_ORDER_PG}")
                page = _dense_values(cursor, connection, ref, after, page_rows) if dense else None
                if page is None:
                    cursor.execute(_keyset_sql(connection, ref, (Point.step, Point.value), after, None, page_rows))
                    rows: list[Row] = list(cursor.fetchall())
                    first, last, count = (rows[0][0], rows[-1][0], len(rows)) if rows else (0, 0, 0)
                else:
                    first, count = page.first, len(page.values)
                    last = first + count - 1
                points = time_points(cursor, ref.times, ref.times_upto, first, last) if count else []
            finally:
                cursor.close()
        if not count:
            return
        yield (rows if page is None else page), points
        if count < page_rows:
            return
        after = last


def warm_up() -> threading.Thread:
    """Import the exports' Arrow modules (pyarrow and numpy: about 0.4 s of a start) on a daemon thread, so
    that the first export after a server starts does not wait for them. An export that comes first waits
    on the import lock for this import instead of making its own."""
    thread = threading.Thread(target=_import_arrow_modules, name="runcast-warm-exports", daemon=True)
    thread.start()
    return thread


def _import_arrow_modules() -> None:
    for name in ("runcast_server.metrics.arrow_pages", "runcast_server.metrics.export_parquet"):
        importlib.import_module(name)


def export_chunks(
    database: Database, refs: list[SeriesRef], fmt: ExportFormat, page_rows: int | None = None,
    connections: ArrowConnections | None = None,
) -> Iterator[bytes]:
    """The export body: a CSV header (for csv), then one chunk per page of points
    (Parquet: the file, one row group per page). ``connections``: PostgreSQL's, kept by the process
    (``AppContext.arrow``); without them, some are opened for this export."""
    size = page_rows or (PARQUET_PAGE_ROWS if fmt == "parquet" else PAGE_ROWS)
    if database.engine.dialect.name == "postgresql":
        yield from _postgres_chunks(database, refs, fmt, size, connections)
        return
    if fmt == "parquet":
        from runcast_server.metrics import arrow_pages, export_parquet  # pyarrow: on use

        yield from export_parquet.parquet_chunks(
            (ref, arrow_pages.page_of_rows(rows, points))
            for ref in refs for rows, points in series_pages(database, ref, size, dense=True))
        return
    if fmt == "csv":
        yield (",".join(COLUMNS) + "\n").encode()
    for ref in refs:
        writer = PageWriter(fmt, ref.segment, ref.key)
        for rows, points in series_pages(database, ref, size):
            yield writer.page(rows, points)


def _postgres_chunks(database: Database, refs: list[SeriesRef], fmt: ExportFormat, size: int,
                     connections: ArrowConnections | None) -> Iterator[bytes]:
    """``export_chunks`` on PostgreSQL: every format from pages read as Arrow columns (``arrow_pages.adbc_pages``)."""
    from runcast_server.metrics import arrow_pages, export_parquet  # pyarrow and ADBC: on use

    own = connections is None
    pool = connections or ArrowConnections(database.engine.url.render_as_string(hide_password=False))
    pages = arrow_pages.adbc_pages(pool, refs, size)
    try:
        if fmt == "parquet":
            yield from export_parquet.parquet_chunks(pages)
            return
        if fmt == "csv":
            yield (",".join(COLUMNS) + "\n").encode()
        current: SeriesRef | None = None
        writer: PageWriter | None = None
        for ref, page in pages:
            if writer is None or ref is not current:
                current, writer = ref, PageWriter(fmt, ref.segment, ref.key)
            yield writer.page_columns(*arrow_pages.text_columns(page))
    finally:
        pages.close()  # its connections back to the pool (a client gone mid-download included)
        if own:
            pool.close()


def filename(run: Run, fmt: ExportFormat) -> str:
    """The download's name; run ids are URL-safe, so it needs no escaping."""
    return f"runcast-{run.id}.{fmt}"
