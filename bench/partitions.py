"""Partitioned points on PostgreSQL: read and delete cost of one run of 10^6 .. 10^8 points.

Starts a throwaway PostgreSQL (the test suite's ``services.PostgresServer``: fsync,
synchronous_commit and full_page_writes off, shared_buffers 128MB; or ``--pg-url``),
migrates it to head, and stores ``--other-runs`` small runs through ``store_batch`` so
the planner sees that many partitions of each table. Then, for each ``--points`` N:

1. a run is started and its first 1,000 points stored through ``store_batch`` (which
   gives the run its block and partitions); the rest is filled server-side, not through
   ingest: ``INSERT INTO points ... SELECT FROM generate_series`` (one series, steps
   0..N-1, value ``3 exp(-s/N) + 0.01 sin(s)``), and the rollup rows of every level are
   synthesised per bucket the same way (the row count and size ingest would write;
   min/max/sum approximate), then ``VACUUM ANALYZE`` of the two partitions;
2. the two reads the run page makes, through ``reads.metrics.query_metrics``, each
   ``--repeat`` times in a fresh session: a raw window of 2,000 steps, and the whole run
   at ``max_points`` 2,000 (from the rollups); medians in ms; and how many partitions the
   plan of the raw read touches (EXPLAIN);
3. table and index sizes of the run's partitions, bytes per point;
4. delete-a-run: the old ``DELETE`` of its points and rollups (timed inside a
   transaction that is rolled back, only for N <= ``--delete-max``), then what
   ``DELETE /runs/{id}`` does: ``tables.delete_run`` (detaches the partitions; the
   parents are locked until its commit: "detach s") and then ``manage.drop_detached``
   (unlinks the files, no lock of the parents: "drop s").

Usage::

    nice -n 10 .venv/bin/python bench/partitions.py --points 1000000 10000000 100000000
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # services.py: the test suite's server helpers

import services
from runcast.wire import events as ev
from runcast_server import tables
from runcast_server.core import migrate
from runcast_server.core.auth import create_token
from runcast_server.core.db import make_engine
from runcast_server.core.models import Project
from runcast_server.ingest.store import store_batch
from runcast_server.metrics.queries import query_metrics
from runcast_server.metrics.rollups import LEVELS
from runcast_server.record import partitions
from runcast_server.record.models import Run, Series
from runcast_server.runs import manage
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

FIRST = 1000  # points stored through store_batch
VALUE = "3 * exp(-({s})::float8 / {n}) + 0.01 * sin(({s})::float8)"


def store(engine: Engine, project_id: int, run_id: str, points: int) -> None:
    """Start a run and store ``points`` steps of ``loss`` through the write path."""
    segment = ev.new_id()
    events = [{"v": 1, "type": "run_started", "run": run_id, "segment": segment, "seq": 0, "ts": time.time(),
               "project": "bench", "name": run_id}]
    events += [{"v": 1, "type": "metrics", "run": run_id, "segment": segment, "seq": 1 + s, "ts": time.time(),
                "step": s, "values": {"loss": 3 * math.exp(-s / max(points, 1))}} for s in range(points)]
    for batch in (events[:1], events[1:]):
        with Session(engine) as session, session.begin():
            store_batch(session, project_id, [ev.validate_event(e) for e in batch])


def fill(engine: Engine, run_id: str, n: int) -> tuple[int, float]:
    """Points FIRST..n-1 and every rollup level, written server-side; returns (series id, seconds)."""
    began = time.perf_counter()
    with engine.begin() as conn:
        sid, block = conn.execute(select(Series.id, Run.block).join(Run, Run.id == Series.run_id)
                                  .where(Series.run_id == run_id)).one()
        value = VALUE.format(s="s", n=n)
        conn.execute(text(f"INSERT INTO points (series_id, step, value, version) SELECT {sid}, s, {value}, 2"
                          f" FROM generate_series({FIRST}, {n - 1}) s"))
        conn.execute(text(f"DELETE FROM rollups WHERE series_id = {sid}"))
        for level in LEVELS:
            lo, hi = f"(b << {level})", f"least(((b + 1) << {level}) - 1, {n - 1})"
            conn.execute(text(
                f"INSERT INTO rollups (series_id, level, bucket, min, max, sum, count, nan_count, last, last_step)"
                f" SELECT {sid}, {level}, b, least({VALUE.format(s=lo, n=n)}, {VALUE.format(s=hi, n=n)}) - 0.01,"
                f" greatest({VALUE.format(s=lo, n=n)}, {VALUE.format(s=hi, n=n)}) + 0.01,"
                f" ({hi} - {lo} + 1) * {VALUE.format(s=f'({lo} + {hi}) / 2', n=n)}, {hi} - {lo} + 1, 0,"
                f" {VALUE.format(s=hi, n=n)}, {hi} FROM generate_series(0, {(n - 1) >> level}) b"))
        conn.execute(text(f"UPDATE series SET count = {n}, min_step = 0, max_step = {n - 1} WHERE id = {sid}"))
        conn.execute(text(f"UPDATE runs SET last_step = {n - 1} WHERE id = :r"), {"r": run_id})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in partitions.RANGE_TABLES:
            conn.execute(text(f"VACUUM ANALYZE {partitions.partition_name(table, block)}"))
    return sid, time.perf_counter() - began


def median_ms(engine: Engine, run_id: str, repeat: int, **view: Any) -> tuple[float, int]:
    """Median ms of ``query_metrics`` (fresh session per call, as a request) and points returned."""
    times, returned = [], 0
    for _ in range(repeat):
        began = time.perf_counter()
        with Session(engine) as session:
            run = session.get(Run, run_id)
            assert run is not None
            answer = query_metrics(session, run, key="loss", segment=None, max_points=2000,
                                   **({"start": None, "end": None} | view))
        times.append(time.perf_counter() - began)
        returned = len(answer.series[0].step)
    return statistics.median(times) * 1000, returned


def partitions_scanned(engine: Engine, sid: int, n: int) -> int:
    """How many tables the plan of the raw window read scans."""
    with engine.connect() as conn:
        [plan] = conn.execute(text(
            f"EXPLAIN (FORMAT JSON) SELECT step, value FROM points WHERE series_id = {sid} AND step BETWEEN {n // 3}"
            f" AND {n // 3 + 1999} ORDER BY step")).scalar_one()
    return len(set(_relations(plan["Plan"])))


def _relations(node: dict[str, Any]) -> list[str]:
    names = [node["Relation Name"]] if "Relation Name" in node else []
    return names + [r for child in node.get("Plans", []) for r in _relations(child)]


def sizes(engine: Engine, block: int) -> dict[str, int]:
    out: dict[str, int] = {}
    with engine.connect() as conn:
        for table in partitions.RANGE_TABLES:
            name = partitions.partition_name(table, block)
            out[f"{table} table"] = conn.execute(text(f"SELECT pg_table_size('{name}')")).scalar_one()
            out[f"{table} index"] = conn.execute(text(f"SELECT pg_indexes_size('{name}')")).scalar_one()
    return out


def old_delete_s(engine: Engine, sid: int) -> float:
    """The old path's DELETE of a run's points and rollups, rolled back (the data stays for the drop)."""
    with engine.connect() as conn:
        began = time.perf_counter()
        conn.execute(text(f"DELETE FROM points WHERE series_id IN ({sid})"))
        conn.execute(text(f"DELETE FROM rollups WHERE series_id IN ({sid})"))
        elapsed = time.perf_counter() - began
        conn.rollback()
    return elapsed


def delete_s(engine: Engine, project_id: int, run_id: str) -> tuple[float, float]:
    """Seconds of ``delete_run`` with its commit (parents locked), then of ``drop_detached``."""
    with Session(engine) as session:
        project = session.get(Project, project_id)
        assert project is not None
        began = time.perf_counter()
        tables.delete_run(session, manage.owned_run(session, run_id, project))
        session.commit()
        detached = time.perf_counter()
        assert manage.drop_detached(session) == 3
        session.commit()
        return detached - began, time.perf_counter() - detached


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--other-runs", type=int, default=100)
    parser.add_argument("--delete-max", type=int, default=100_000_000)
    parser.add_argument("--pg-url", help="a PostgreSQL database to use (default: start a throwaway one)")
    args = parser.parse_args()
    if args.pg_url:
        url = args.pg_url
    else:
        pg = services.PostgresServer().start()
        url = pg.url()
        print("throwaway PostgreSQL: fsync, synchronous_commit, full_page_writes off; shared_buffers 128MB")
    try:
        migrate.upgrade(url)
        engine = make_engine(url)
        with Session(engine) as session, session.begin():
            create_token(session, "bench")
            project_id = session.scalar(select(Project.id).where(Project.name == "bench"))
        assert project_id is not None
        for i in range(args.other_runs):
            store(engine, project_id, f"bench-other-{i:04d}", 10)
        print(f"{args.other_runs} other runs of 10 points: {args.other_runs + 1} partitions per table")
        head = ("points", "fill s", "raw 2k ms", "whole run ms", "parts", "points tbl MiB", "points idx MiB",
                "rollups tbl MiB", "rollups idx MiB", "B/point", "DELETE s", "detach s", "drop s")
        rows = []
        for n in args.points:
            run_id = f"bench-run-{n}"
            store(engine, project_id, run_id, FIRST)
            sid, fill_seconds = fill(engine, run_id, n)
            with engine.connect() as conn:
                block = conn.execute(select(Run.block).where(Run.id == run_id)).scalar_one()
            raw, got = median_ms(engine, run_id, args.repeat, start=n // 3, end=n // 3 + 1999)
            assert got == 2000, got
            whole, _ = median_ms(engine, run_id, args.repeat)
            size = sizes(engine, block)
            old = f"{old_delete_s(engine, sid):.1f}" if n <= args.delete_max else "-"
            scanned = partitions_scanned(engine, sid, n)
            detach, drop = delete_s(engine, project_id, run_id)
            rows.append((f"{n:,}", f"{fill_seconds:.0f}", f"{raw:.2f}", f"{whole:.2f}",
                         str(scanned), *(mib(v) for v in size.values()),
                         f"{sum(size.values()) / n:.1f}", old, f"{detach:.3f}", f"{drop:.3f}"))
            print(" | ".join(rows[-1]), flush=True)
        print()
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for row in rows:
            print("| " + " | ".join(row) + " |")
        engine.dispose()
    finally:
        if not args.pg_url:
            pg.stop()


if __name__ == "__main__":
    main()
