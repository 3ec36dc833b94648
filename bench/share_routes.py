"""Latency of the share routes (docs/sharing.md) for one series of ``--points`` steps with a
one-step spike, on embedded SQLite, through the app (FastAPI TestClient, no network).

Prints a table: median and p90 of ``--repeat`` requests (after one warm-up) for the badge,
the /metrics read a figure makes (800 px: 1,600 buckets), and the figure as SVG and PNG.
Usage::

    .venv/bin/python bench/share_routes.py --points 100000 --repeat 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

from runcast.wire import events as ev

BATCH = 1000


def fill(db: Any, points: int) -> str:
    """One public run of ``points`` steps of ``loss`` (spike in the middle) in ``db`` (a core.db.Database);
    returns its id."""
    from runcast_server.core.auth import create_token
    from runcast_server.ingest.store import store_batch
    from runcast_server.core.models import Project
    from sqlalchemy import select

    with db.scope() as session:
        create_token(session, "bench")
        project_id = session.scalar(select(Project.id).where(Project.name == "bench"))
    run, segment, seq = ev.new_id(), ev.new_id(), 0

    def event(kind: str, **fields: Any) -> dict[str, Any]:
        nonlocal seq
        seq += 1
        return ev.validate_event({"v": 1, "type": kind, "run": run, "segment": segment, "seq": seq - 1,
                                  "ts": time.time(), **fields})

    with db.scope() as session:
        store_batch(session, project_id, [event("run_started", project="bench", name="bench")])
    spike = points // 2
    for lo in range(1, points + 1, BATCH):
        batch = [event("metrics", step=s, values={"loss": 100.0 if s == spike else 1.0 + (s % 10) / 1000})
                 for s in range(lo, min(points, lo + BATCH - 1) + 1)]
        with db.scope() as session:
            store_batch(session, project_id, batch)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    os.environ["RUNCAST_DATA_DIR"] = tempfile.mkdtemp(prefix="runcast-bench-share-")
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app

    with TestClient(create_app()) as client:
        began = time.perf_counter()
        run = fill(client.app.state.context.database, args.points)
        print(f"filled {args.points:,} points in {time.perf_counter() - began:.1f} s")
        cases = [
            ("badge", f"/badge/runs/{run}.svg", {"key": "loss"}),
            ("metrics, 1600 buckets", f"/api/v1/runs/{run}/metrics", {"key": "loss", "max_points": 1600}),
            ("plot.svg 800x450", f"/api/v1/runs/{run}/plot.svg", {"key": "loss"}),
            ("plot.png 800x450", f"/api/v1/runs/{run}/plot.png", {"key": "loss"}),
            ("plot.png 800x450 scale 2", f"/api/v1/runs/{run}/plot.png", {"key": "loss", "scale": 2}),
        ]
        print("| route | bytes | median ms | p90 ms |\n|---|---|---|---|")
        for name, path, params in cases:
            client.get(path, params=params)  # warm-up
            times, size = [], 0
            for _ in range(args.repeat):
                t = time.perf_counter()
                res = client.get(path, params=params)
                times.append((time.perf_counter() - t) * 1000)
                assert res.status_code == 200, res.text
                size = len(res.content)
            times.sort()
            p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
            print(f"| {name} | {size:,} | {statistics.median(times):.0f} | {p90:.0f} |")


if __name__ == "__main__":
    main()
