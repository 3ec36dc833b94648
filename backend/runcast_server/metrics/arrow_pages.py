"""A series' points a page at a time as Arrow columns: ``step`` (int64), ``value`` (float64, NaN as
null, as stored) and ``time`` (the step's wall time, null without one), for the exports.

On PostgreSQL, pages are read with ADBC (its PostgreSQL driver, through binary COPY) straight
into Arrow columns: no Python object per point (``adbc_pages``); pages of consecutive steps
two at a time, on connections of their own, kept open between exports (``arrow_connections``).
On SQLite they are read through the connection SQLAlchemy uses (``export.series_pages``) and
turned into Arrow columns (``page_of_rows``): ADBC's SQLite driver is a second copy of the
SQLite library, and a second copy in one process breaks SQLite's locking (closing its file
releases the POSIX locks the server's own connections hold on the database:
https://sqlite.org/howtocorrupt.html, "multiple copies of SQLite linked into the same
application"; writes then failed with "disk I/O error"). Each page is one query, so no
transaction stays open across the download.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runcast_server.metrics.series_ref import DensePage
from runcast_server.metrics.step_times import TimePoints, time_points_sql

if TYPE_CHECKING:
    from runcast_server.metrics.arrow_connections import ArrowConnections
    from runcast_server.metrics.series_ref import SeriesRef

_ROW: Final = pa.struct([pa.field("step", pa.int64()), pa.field("value", pa.float64())])
_VALUE: Final = pa.struct([pa.field("value", pa.float64())])


def _page(cursor: Any, series_id: int, after: int, limit: int, upto: int | None = None) -> pa.Table:
    # ``value`` is typed by the table's column (float8) whatever a page holds: NULL (NaN) reads as null.
    due = "" if upto is None else f" AND version <= {int(upto)}"  # a delayed reader (policy/delay.py)
    cursor.execute(
        f"SELECT step, value FROM points WHERE series_id = {int(series_id)} AND step > {int(after)}{due}"
        f" ORDER BY step LIMIT {int(limit)}"
    )
    return cursor.fetch_arrow_table()


def _span(cursor: Any, series_id: int, after: int, steps: int) -> pa.Table:
    """The points of steps ``after + 1 .. after + steps``, the columns ``_page`` answers."""
    cursor.execute(
        f"SELECT step, value FROM points WHERE series_id = {int(series_id)} AND step > {int(after)}"
        f" AND step <= {int(after) + int(steps)} ORDER BY step"
    )
    return cursor.fetch_arrow_table()


def _times(steps: pa.Array, at: np.ndarray, seconds: np.ndarray) -> pa.Array:
    """The ``time`` column of ``steps`` (ascending): each step's last time point (``at``, ascending, with its
    ``seconds``) at or before it, null before the first."""
    if not len(at):
        return pa.nulls(len(steps), pa.float64())
    index = np.searchsorted(at, steps.to_numpy(zero_copy_only=False), side="right") - 1
    return pa.array(seconds[np.maximum(index, 0)], pa.float64(), mask=index < 0)


def _point_arrays(points: TimePoints) -> tuple[np.ndarray, np.ndarray]:
    return (np.fromiter((step for step, _ in points), np.int64, len(points)),
            np.fromiter((t for _, t in points), np.float64, len(points)))


def _time_arrays(cursor: Any, ref: SeriesRef, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """``step_times.time_points`` of ``first..last`` read as columns: one a step for a slow run, and ADBC's
    row by row ``fetchall`` costs about 9 µs a row."""
    if ref.times is None:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    cursor.execute(time_points_sql(ref.times, first, last, ref.times_upto))
    points = cursor.fetch_arrow_table()
    return (pc.cast(points.column("step"), pa.int64()).to_numpy(),
            pc.cast(points.column("value"), pa.float64()).to_numpy())


def page_of_rows(rows: Sequence[tuple[int, float | None]] | DensePage, points: TimePoints) -> pa.Table:
    """A page of ``(step, value)`` rows or a ``DensePage`` (NULL value = NaN) as the columns ``_page``
    answers (``step``, ``value`` with NaN as null), with ``time``."""
    # pyarrow reads the tuples in C++ (a struct per row): no Python list per column, no bool per row.
    if isinstance(rows, DensePage):
        (value,) = pa.array(rows.values, type=_VALUE).flatten()
        step = pa.array(np.arange(rows.first, rows.first + len(rows.values), dtype=np.int64))
    else:
        step, value = pa.array(rows, type=_ROW).flatten()
    return pa.table({"step": step, "value": value,
                     "time": _times(step, *_point_arrays(points))})


class _Readers:
    """Threads that read pages on connections of their own (one each, taken by the thread), two at once."""

    def __init__(self, connections: ArrowConnections) -> None:
        self._connections = connections
        self._local = threading.local()
        self._taken: list[tuple[Any, Any]] = []  # (connection, this thread's cursor on it)
        self._lock = threading.Lock()
        self._failed = False
        self.pool = ThreadPoolExecutor(2, thread_name_prefix="runcast-export-read", initializer=self._take)

    def _take(self) -> None:
        connection = self._connections.take()
        cursor = self._local.cursor = connection.cursor()
        with self._lock:
            self._taken.append((connection, cursor))

    def span(self, ref: SeriesRef, after: int, steps: int) -> pa.Table:
        """``_span`` with its ``time`` column, on this thread's connection."""
        try:
            cursor = self._local.cursor
            page = _span(cursor, ref.id, after, steps)
            return _timed(cursor, ref, page) if page.num_rows else page
        except BaseException:
            self._failed = True
            raise

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)  # before the connections go back
        for connection, cursor in self._taken:
            ok = not self._failed
            try:
                cursor.close()  # its statement, on a connection that is kept
            except Exception:
                ok = False
            self._connections.give(connection, ok=ok)


def adbc_pages(connections: ArrowConnections, refs: Sequence[SeriesRef],
               page_rows: int) -> Generator[tuple[SeriesRef, pa.Table], None, None]:
    """Each series' pages of ``page_rows`` points, read by ADBC from PostgreSQL, in step order.

    A page is the next ``page_rows`` points (``LIMIT``). Where every step is stored, the pages are
    known before they are read: the spans of ``page_rows`` steps from a series' first step to its
    last (``SELECT min(step), max(step)``). Those of every series are read in order, two at once by
    helper threads (``_Ahead``), so that PostgreSQL, about half of an export's time, works on both
    CPUs while this thread encodes the page before. A span that holds fewer points than steps has
    a gap: from there on, that series is read by ``LIMIT`` on this thread.
    """
    connection = connections.take()
    cursor = connection.cursor()
    ahead: _Ahead | None = None
    ok = False
    try:
        spans = deque(_spans(cursor, refs, page_rows))
        if len(spans) > 1:
            ahead = _Ahead(_Readers(connections), refs, spans, page_rows)
        for index, ref in enumerate(refs):
            after = -1
            if ahead is not None and ahead.has(index):
                after = yield from ahead.pages(index)
            while True:
                page = _page(cursor, ref.id, after, page_rows, ref.upto)
                if page.num_rows == 0:
                    break
                yield ref, _timed(cursor, ref, page)
                if page.num_rows < page_rows:
                    break
                after = page.column("step")[-1].as_py()
        ok = True
    except GeneratorExit:  # the client went away between two pages: no answer is left half read
        ok = True
        raise
    finally:
        if ahead is not None:
            ahead.readers.close()
        cursor.close()
        connections.give(connection, ok)


Span = tuple[int, int, int]
"""A page known before it is read: (index of its series, the step after which it starts, the series' last step)."""


def _spans(cursor: Any, refs: Sequence[SeriesRef], page_rows: int) -> Iterator[Span]:
    for index, ref in enumerate(refs):
        if ref.upto is not None:  # a delayed reader's pages skip later versions: not known before they are read
            continue
        cursor.execute(f"SELECT min(step), max(step) FROM points WHERE series_id = {int(ref.id)}")
        lo, hi = cursor.fetchone()
        if lo is not None:
            yield from ((index, start, hi) for start in range(lo - 1, hi, page_rows))


class _Ahead:
    """The spans of every series, read in order, two at a time, by ``readers``."""

    def __init__(self, readers: _Readers, refs: Sequence[SeriesRef], spans: deque[Span], page_rows: int) -> None:
        self.readers = readers
        self._refs = refs
        self._spans = spans
        self._page_rows = page_rows
        self._reading: deque[tuple[Span, Future[pa.Table]]] = deque()
        self._fill()

    def has(self, index: int) -> bool:
        return bool(self._reading) and self._reading[0][0][0] == index

    def pages(self, index: int) -> Generator[tuple[SeriesRef, pa.Table], None, int]:
        """Series ``index``'s pages while each of its spans holds every step: a span of ``page_rows`` steps
        (the last: up to its last step) is then the page ``LIMIT`` gives. Returns the step after which
        pages go on with ``LIMIT``: its last step, or the start of the first span with a gap."""
        after = -1
        while self.has(index):
            (_, start, hi), reading = self._reading.popleft()
            page = reading.result()
            if page.num_rows != min(self._page_rows, hi - start):  # a gap (or points newer than ``hi``)
                self._drop(index)
                return start
            self._fill()
            yield self._refs[index], page
            after = start + page.num_rows
        return after

    def _fill(self) -> None:
        while self._spans and len(self._reading) < 2:
            span = self._spans.popleft()
            self._reading.append((span, self.readers.pool.submit(self.readers.span, self._refs[span[0]], span[1],
                                                                 self._page_rows)))

    def _drop(self, index: int) -> None:
        """Forget series ``index``'s other spans (those being read are left to finish, unused)."""
        while self._reading and self._reading[0][0][0] == index:
            self._reading.popleft()
        while self._spans and self._spans[0][0] == index:
            self._spans.popleft()
        self._fill()


def _timed(cursor: Any, ref: SeriesRef, page: pa.Table) -> pa.Table:
    """``page`` with its ``time`` column."""
    step = pc.cast(page.column("step"), pa.int64()).combine_chunks()
    first, last = step[0].as_py(), step[-1].as_py()
    return page.append_column("time", _times(step, *_time_arrays(cursor, ref, first, last)))




def text_columns(page: pa.Table) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int, float | None]]]:
    """A page as the text writer takes it (``export_text.PageWriter.page_columns``): its steps, its values
    (NaN where stored as NULL) and its runs of rows that share a time, ``(start, end, time)``."""
    steps = pc.cast(page.column("step"), pa.int64()).to_numpy()
    values = pc.fill_null(pc.cast(page.column("value"), pa.float64()), np.nan).to_numpy()
    time = pc.cast(page.column("time"), pa.float64())
    untimed = time.is_null().to_numpy(zero_copy_only=False)
    seconds = pc.fill_null(time, 0.0).to_numpy()
    bounds = (np.flatnonzero((seconds[1:] != seconds[:-1]) | (untimed[1:] != untimed[:-1])) + 1).tolist()
    starts, ends = [0, *bounds], [*bounds, len(steps)]
    return steps, values, [(a, b, None if untimed[a] else float(seconds[a])) for a, b in zip(starts, ends, strict=True)]
