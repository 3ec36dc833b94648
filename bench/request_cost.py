"""The server's cost of one ingest request of a live run (a few steps a request), embedded, in process.

    PYTHONPATH=<checkout>/backend:<checkout>/trainer:<checkout>/tests .venv/bin/python bench/request_cost.py

A live run sends a small batch at each flush, so the server's fixed cost per batch (the write
door's checks, the inbox row, three transactions, the detectors' state rows, the statements
each runs) is most of what it spends on it, and what bounds how many runs and ranks one
server holds. This builds the app on a fresh embedded data dir (SQLite, eager tasks), starts
one run, then posts ``--requests`` batches of each ``--steps`` count (one key, ``train/loss``,
so the loss detectors run) through Starlette's test client, and prints, per size, the median
and the 90th percentile of a request's wall time and the SQL statements it ran (those
SQLAlchemy executes; the points' own ``executemany`` is not counted). The points of each size
continue the run's steps. ``PYTHONPATH`` picks the checkout measured.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="requests of each size")
    parser.add_argument("--steps", type=int, nargs="+", default=[1, 10, 100], help="steps a request")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as data_dir:
        for key in [k for k in os.environ if k.startswith("RUNCAST_")]:
            del os.environ[key]
        os.environ.update(RUNCAST_DATA_DIR=data_dir, RUNCAST_ALERT_CHECK_INTERVAL_S="3600",
                          RUNCAST_INBOX_SWEEP_INTERVAL_S="3600")
        from fastapi.testclient import TestClient
        from runcast.wire import events as ev
        from runcast_server.app import create_app
        from runcast_server.core.auth import create_token
        from sqlalchemy import event

        app = create_app()
        with TestClient(app) as client:
            database = app.state.context.database
            with database.scope() as session:
                headers = {"Authorization": f"Bearer {create_token(session, 'bench')}"}
            statements = [0]

            @event.listens_for(database.engine, "before_cursor_execute")
            def _count(*_: object) -> None:
                statements[0] += 1

            run, segment, seq = ev.new_id(), ev.new_id(), 0

            def post(body: list[dict[str, object]]) -> float:
                began = time.perf_counter()
                response = client.post("/api/v1/ingest", content=ev.dumps_batch(body), headers=headers)
                took = time.perf_counter() - began
                assert response.status_code == 202, response.text
                return took

            def event_of(kind: str, **fields: object) -> dict[str, object]:
                nonlocal seq
                out = {"v": ev.SCHEMA_VERSION, "type": kind, "run": run, "segment": segment, "seq": seq,
                       "ts": time.time(), **fields}
                seq += 1
                return out

            post([event_of("run_started", project="bench", name="request-cost")])
            step = 0
            print(f"machine: {platform.machine()}, {os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}")
            print("| steps a request | requests | median ms | p90 ms | statements a request |")
            print("|--:|--:|--:|--:|--:|")
            for size in args.steps:
                times = []
                statements[0] = 0
                for _ in range(args.requests):
                    body = [event_of("metrics", step=s, values={"train/loss": 2.0 + math.sin(s / 50) * 0.1})
                            for s in range(step, step + size)]
                    step += size
                    times.append(post(body))
                times.sort()
                print(f"| {size} | {args.requests} | {1000 * statistics.median(times):.2f} | "
                      f"{1000 * times[int(0.9 * len(times))]:.2f} | {statements[0] / args.requests:.0f} |")
            print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
