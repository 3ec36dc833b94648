"""The server's CPU per point in each stage of embedded ingest, for one event a step and for columns.

    PYTHONPATH=backend:trainer .venv/bin/python bench/ingest_stages.py --steps 100000 --keys 1 8

In-process, no HTTP: a series of ``--steps`` steps x ``--keys`` floats is cut into batches of
5000 steps as the SDK cuts them (``sender.batches.batch_bodies``, with and without columns),
then each body goes through the stages ``POST /ingest`` runs in the embedded default: parse
(``inbox.rows.parse_body``), validate (``validate_batch``), store (``store_batch`` and the
commit) and detect (``detect_batch`` and the commit), on a fresh SQLite database per form.
Prints CPU µs per point (``time.process_time``) of each stage and the body's bytes per point.
``--profile FILE`` writes a cProfile of the columnar form's stages (``pstats`` reads it).
"""

from __future__ import annotations

import argparse
import cProfile
import math
import tempfile
import time
from pathlib import Path

STAGES = ("parse", "validate", "store", "detect")


def bodies(steps: int, keys: int, columns: bool) -> list[bytes]:
    from runcast.sender.batches import batch_bodies
    from runcast.wire.events import dumps_batch

    names = ["train/loss", *(f"k{i}" for i in range(1, keys))]
    run, seg = "bench_run_0001", "bench_seg_0001"
    head = {"v": 1, "type": "run_started", "run": run, "segment": seg, "seq": 0, "ts": 1e9, "name": "stages",
            "visibility": "public"}
    wire = [{"v": 1, "type": "metrics", "run": run, "segment": seg, "seq": s + 1, "ts": 1e9 + s * 0.01, "step": s,
             "values": {k: math.sin(s * 0.01 + j) + 2.0 for j, k in enumerate(names)}} for s in range(steps)]
    return [dumps_batch([head]), *(body for body, _ in batch_bodies(wire, 5000, columns=columns))]


def run_form(steps: int, keys: int, columns: bool, profile: cProfile.Profile | None) -> tuple[dict[str, float], int]:
    from runcast.wire.events import validate_batch
    from runcast_server.alerts.engine import detect_batch
    from runcast_server.core import migrate
    from runcast_server.core.auth import get_or_create_project
    from runcast_server.core.db import make_engine
    from runcast_server.inbox.rows import parse_body
    from runcast_server.ingest.store import store_batch
    from sqlalchemy.orm import Session

    cpu = dict.fromkeys(STAGES, 0.0)
    sent = bodies(steps, keys, columns)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'runcast.db'}"
        migrate.upgrade(url)
        engine = make_engine(url)
        with Session(engine) as session:
            project = get_or_create_project(session, "bench").id
            session.commit()
        for i, body in enumerate(sent):
            timed = i > 0 and profile is not None
            if timed:
                profile.enable()  # type: ignore[union-attr]
            t = time.process_time()
            doc = parse_body(body)
            t, cpu["parse"] = _lap(t, cpu["parse"])
            events = validate_batch(doc)
            t, cpu["validate"] = _lap(t, cpu["validate"])
            with Session(engine) as session:
                result = store_batch(session, project, events, received_at=time.time())
                session.commit()
            t, cpu["store"] = _lap(t, cpu["store"])
            with Session(engine) as session:
                detect_batch(session.connection(), events, time.time(), result.segments)
                session.commit()
            t, cpu["detect"] = _lap(t, cpu["detect"])
            if timed:
                profile.disable()  # type: ignore[union-attr]
        engine.dispose()
    return cpu, sum(map(len, sent))


def _lap(start: float, total: float) -> tuple[float, float]:
    now = time.process_time()
    return now, total + now - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--profile", type=Path, help="write a cProfile of the columnar form here")
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        print(f"load average at start: {f.read().split()[:3]}")
    print("| keys | form | " + " | ".join(f"{s} µs/pt" for s in STAGES) + " | total µs/pt | body bytes/pt |")
    print("|---|---|" + "--:|" * (len(STAGES) + 2))
    profile = cProfile.Profile() if args.profile else None
    for keys in args.keys:
        for columns in (False, True):
            cpu, size = run_form(args.steps, keys, columns, profile if columns else None)
            points = args.steps * keys
            cells = " | ".join(f"{cpu[s] / points * 1e6:.2f}" for s in STAGES)
            print(f"| {keys} | {'columns' if columns else 'events'} | {cells} | "
                  f"{sum(cpu.values()) / points * 1e6:.2f} | {size / points:.1f} |", flush=True)
    if profile is not None:
        profile.dump_stats(args.profile)
    with open("/proc/loadavg") as f:
        print(f"load average at end: {f.read().split()[:3]}")


if __name__ == "__main__":
    main()
