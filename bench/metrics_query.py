"""Latency of the metrics read for a 2,000-point view of a long series on embedded SQLite.

Fills a fresh SQLite database (in a temp dir, or ``--db PATH`` to reuse one) with one
series of ``--points`` steps through the real write path (``store_batch``), then times
``query_metrics`` for full and zoomed views. Usage::

    .venv/bin/python bench/metrics_query.py --points 1000000 --repeat 20
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

from runcast.wire import events as ev
from runcast_server.core import migrate
from runcast_server.core.auth import create_token
from runcast_server.core.db import make_engine
from runcast_server.core.models import Project
from runcast_server.ingest.store import store_batch
from runcast_server.metrics.queries import query_metrics
from runcast_server.record.models import Run
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

RUN_ID = "bench-run-0001"
BATCH = 1000


def fill(engine: Engine, points: int) -> float:
    """Write ``points`` steps of one metric; returns the seconds it took."""
    with Session(engine) as session, session.begin():
        create_token(session, "bench")
        project_id = session.scalar(select(Project.id).where(Project.name == "bench"))
    assert project_id is not None
    segment = ev.new_id()
    seq = 0

    def event(kind: str, **fields: object) -> dict[str, object]:
        nonlocal seq
        raw = {
            "v": 1,
            "type": kind,
            "run": RUN_ID,
            "segment": segment,
            "seq": seq,
            "ts": time.time(),
            **fields,
        }
        seq += 1
        return ev.validate_event(raw)

    began = time.perf_counter()
    with Session(engine) as session, session.begin():
        store_batch(
            session, project_id, [event("run_started", project="bench", name="bench")]
        )
    for lo in range(0, points, BATCH):
        batch = [
            event(
                "metrics",
                step=s,
                values={"loss": 3 * math.exp(-s / points) + 0.01 * math.sin(s)},
            )
            for s in range(lo, min(lo + BATCH, points))
        ]
        with Session(engine) as session, session.begin():
            store_batch(session, project_id, batch)
    return time.perf_counter() - began


def timed(
    engine: Engine, repeat: int, **params: object
) -> tuple[list[float], int, int]:
    """Per-call seconds (fresh session each, like a request), buckets returned and level."""
    args = {
        "key": "loss",
        "segment": None,
        "start": None,
        "end": None,
        "max_points": 2000,
    } | params
    times, buckets, level = [], 0, 0
    for _ in range(repeat):
        began = time.perf_counter()
        with Session(engine) as session:
            run = session.get(Run, RUN_ID)
            assert run is not None
            result = query_metrics(session, run, **args)  # type: ignore[arg-type]
        times.append(time.perf_counter() - began)
        buckets, level = len(result.series[0].step), result.level
    return times, buckets, level


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--db", type=Path, help="SQLite file to fill (or reuse, if it holds the run)"
    )
    args = parser.parse_args()
    path = args.db or Path(tempfile.mkdtemp(prefix="runcast-bench-")) / "bench.db"
    url = f"sqlite:///{path}"
    migrate.upgrade(url)
    engine = make_engine(url)
    with Session(engine) as session:
        have = session.get(Run, RUN_ID) is not None
    if not have:
        seconds = fill(engine, args.points)
        print(
            f"filled {args.points:,} points via store_batch in {seconds:.1f} s ({args.points / seconds:,.0f}/s)"
        )
    with Session(engine) as session:
        from runcast_server.metrics.models import Rollup
        from runcast_server.record.models import Point

        n_points = session.scalar(select(func.count()).select_from(Point))
        n_rollups = session.scalar(select(func.count()).select_from(Rollup))
    print(f"database {path}: {n_points:,} points, {n_rollups:,} rollup rows")
    n = n_points or 0
    views = {
        "full run": {},
        "middle half": {"start": n // 4, "end": 3 * n // 4},
        "1/100 zoom": {"start": n // 2, "end": n // 2 + n // 100},
        "raw window (2,000 steps)": {"start": n // 3, "end": n // 3 + 1999},
    }
    for name, view in views.items():
        times, buckets, level = timed(engine, args.repeat, **view)
        ms = sorted(t * 1000 for t in times)
        print(
            f"{name:26s} level {level:2d}  {buckets:5d} buckets  "
            f"median {statistics.median(ms):6.2f} ms  p90 {ms[int(0.9 * (len(ms) - 1))]:6.2f} ms  min {ms[0]:6.2f} ms"
        )


if __name__ == "__main__":
    main()
