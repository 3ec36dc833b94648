"""Throughput of ``store_batch``: batches of 1000 metrics events x 8 keys into one run.

    python tests/bench/store_batch.py --url postgresql+psycopg://USER@HOST:PORT/DB [--batches 50]

The database is migrated to head first; every invocation writes a new run, so it
can be repeated on the same database. Event validation is timed separately: the
ingest task pays for it too.
"""

from __future__ import annotations

import argparse
import math
import secrets
import statistics
import time

from runcast.wire.events import validate_event
from runcast_server.core import migrate
from runcast_server.core.auth import get_or_create_project
from runcast_server.core.db import make_engine
from runcast_server.ingest.store import store_batch
from sqlalchemy.orm import Session


def wire_batches(run: str, segment: str, batches: int, events: int, keys: int) -> list[list[dict]]:
    out, seq = [], 1
    for b in range(batches):
        batch = []
        for i in range(events):
            step = b * events + i
            values = {f"train/m{k}": math.sin(step * 0.01 + k) for k in range(keys)}
            batch.append({"v": 1, "type": "metrics", "run": run, "segment": segment, "seq": seq, "ts": time.time(), "step": step, "values": values})
            seq += 1
        out.append(batch)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--keys", type=int, default=8)
    args = parser.parse_args()

    migrate.upgrade(args.url)
    engine = make_engine(args.url)
    run, segment = "bench_" + secrets.token_hex(6), "seg_" + secrets.token_hex(6)
    with Session(engine) as session:
        project_id = get_or_create_project(session, "bench").id
        start = {"v": 1, "type": "run_started", "run": run, "segment": segment, "seq": 0, "ts": time.time(), "project": "bench", "name": "bench"}
        store_batch(session, project_id, [validate_event(start)])
        session.commit()

    wire = wire_batches(run, segment, args.batches, args.events, args.keys)
    t = time.perf_counter()
    validated = [[validate_event(e) for e in batch] for batch in wire]
    validate_s = time.perf_counter() - t
    per_batch = []
    for batch in validated:
        t = time.perf_counter()
        with Session(engine) as session:
            store_batch(session, project_id, batch)
            session.commit()
        per_batch.append(time.perf_counter() - t)
    points = args.batches * args.events * args.keys
    total = sum(per_batch)
    print(f"store_batch: {points / total:,.0f} points/s ({args.batches} batches of {args.events} events x {args.keys} keys, "
          f"median {statistics.median(per_batch) * 1000:.1f} ms/batch)")
    print(f"with validation: {points / (total + validate_s):,.0f} points/s")
    engine.dispose()


if __name__ == "__main__":
    main()
