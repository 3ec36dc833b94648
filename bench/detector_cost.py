"""The anomaly detectors' CPU cost per point on dense series (issue 31), best of ``--repeat``.

    .venv/bin/python bench/detector_cost.py --batches 4 --repeat 5

Two parts, each on consecutive batches of ``--steps`` steps of one run (a falling loss with
noise, a few spikes and a NaN), 1 and 8 keys a step (of the 8, ``train/loss``,
``train/grad_norm`` and, every 100 steps, ``val/loss`` are keys a detector reads):

* ``feed``: ``SegmentRunner.feed`` alone, with one detector enabled at a time and with all
  of them; between batches the states go through JSON as they do through the state rows,
  which is timed apart (``state json``);
* ``detect_batch``: the whole phase two on the embedded default (a SQLite file, migrated;
  each batch stored first by ``store_batch``, untimed): gathering, state rows, feed, alerts.
  The batches are what the SDK sends: a ``metrics_columns`` event each.

``--curve sine`` logs ``bench/embedded_ingest.py``'s curves instead (every key a sine around 2
with a period of 628 steps): the loss then rises for hundreds of steps every period, and the
divergence and plateau alerts open and close all along the run.

Prints µs of CPU (``time.process_time``) per logged step, best of ``--repeat`` runs of all the
batches.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from runcast.wire import events as ev
from runcast.wire.columns import encode_columns
from runcast_server.alerts.engine import detect_batch
from runcast_server.core import migrate
from runcast_server.core.auth import create_token
from runcast_server.core.db import make_engine
from runcast_server.core.models import Project
from runcast_server.detectors import config as dconfig
from runcast_server.detectors.core import SegmentRunner
from runcast_server.detectors.stats import stored_state
from runcast_server.ingest.store import store_batch
from sqlalchemy import select
from sqlalchemy.orm import Session

EIGHT = ("train/loss", "train/lr", "train/grad_norm", "train/tokens", "perf/mfu", "perf/step_s", "train/acc", "train/ppl")
SECTIONS = ("nonfinite", "spike", "plateau", "divergence", "grad_norm")


def series(steps: int, keys: int, curve: str = "loss", seed: int = 7) -> list[dict[str, float]]:
    """Per step, the values logged: a power-law loss with noise, spikes every ~2000 steps, one NaN
    (``curve`` "loss"); or ``embedded_ingest``'s sines ("sine")."""
    if curve == "sine":
        return [{k: math.sin(s * 0.01 + j) + 2.0 for j, k in enumerate(EIGHT[:keys])} for s in range(steps)]
    rng = random.Random(seed)
    out = []
    for s in range(steps):
        loss = 3.0 * (1 + s / 500) ** -0.3 + rng.gauss(0, 0.02)
        if s % 2011 in (0, 1, 2):
            loss *= 3
        if s == steps // 2 + 17:
            loss = math.nan
        values = {"train/loss": loss}
        for k in EIGHT[1:keys]:
            values[k] = abs(rng.gauss(1.0, 0.1)) if k != "train/grad_norm" else abs(rng.gauss(1.0, 0.3))
        if keys > 1 and s % 100 == 99:
            values["val/loss"] = loss + 0.1
        out.append(values)
    return out


def feed_cost(values: list[dict[str, float]], batch: int, only: str | None) -> tuple[float, float]:
    """(feed seconds, state JSON seconds) of CPU for all the batches, one detector (``only``) or all."""
    cfg = dconfig.effective({s: {"enabled": s == only} for s in SECTIONS} if only else None)
    stored: dict[tuple[str, str], str] = {}
    feed_s = json_s = 0.0
    for lo in range(0, len(values), batch):
        t0 = time.process_time()
        states = {k: json.loads(v) for k, v in stored.items()}
        t1 = time.process_time()
        points = [(s, k, v) for s in range(lo, min(lo + batch, len(values))) for k, v in values[s].items()]
        t2 = time.process_time()
        runner = SegmentRunner(cfg, states)
        runner.feed(points)
        t3 = time.process_time()
        for sk in runner.touched:
            stored[sk] = json.dumps(stored_state(states[sk]))
        t4 = time.process_time()
        feed_s += t3 - t2
        json_s += (t1 - t0) + (t4 - t3)
    return feed_s, json_s


def detect_cost(values: list[dict[str, float]], batch: int) -> float:
    """CPU seconds of ``detect_batch`` over all the batches, each stored beforehand, on a fresh SQLite file."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        migrate.upgrade(url)
        engine = make_engine(url)
        with Session(engine) as session, session.begin():
            create_token(session, "bench")
            project_id = session.scalar(select(Project.id).where(Project.name == "bench"))
        assert project_id is not None
        run, segment = ev.new_id(), ev.new_id()
        seq = iter(range(10**9))

        def event(kind: str, **fields: Any) -> dict[str, Any]:
            return ev.validate_event({"v": 1, "type": kind, "run": run, "segment": segment, "seq": next(seq),
                                      "ts": time.time(), **fields})

        first = [event("run_started", project="bench", name="bench")]
        with Session(engine) as session, session.begin():
            store_batch(session, project_id, first)
        spent = 0.0
        for lo in range(0, len(values), batch):
            rows = [{"v": 1, "type": "metrics", "run": run, "segment": segment, "seq": next(seq), "ts": time.time(),
                     "step": s, "values": {k: ev.encode_value(v) for k, v in values[s].items()}}
                    for s in range(lo, min(lo + batch, len(values)))]
            events = ev.validate_batch({"v": 1, "events": encode_columns(rows)})
            with Session(engine) as session, session.begin():
                result = store_batch(session, project_id, events)
            t0 = time.process_time()
            with Session(engine) as session, session.begin():
                detect_batch(session.connection(), events, time.time(), result.segments)
            spent += time.process_time() - t0
        engine.dispose()
        return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000, help="steps a batch")
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5, help="best of this many")
    parser.add_argument("--no-db", action="store_true", help="skip the detect_batch part")
    parser.add_argument("--no-feed", action="store_true", help="skip the feed part")
    parser.add_argument("--curve", choices=("loss", "sine"), default="loss")
    args = parser.parse_args()
    print(f"{args.batches} batches of {args.steps} steps, curve {args.curve}; best of {args.repeat}; "
          f"load {os.getloadavg()}")
    print(f"{'keys':>4} {'part':<22} {'µs/step':>9}")
    for keys in (1, 8):
        values = series(args.steps * args.batches, keys, args.curve)
        n = len(values)
        for only in () if args.no_feed else (*SECTIONS[: 4 if keys == 1 else 5], None):
            best = min((feed_cost(values, args.steps, only) for _ in range(args.repeat)), key=lambda t: t[0])
            print(f"{keys:>4} {'feed ' + (only or 'all'):<22} {best[0] / n * 1e6:>9.2f}", flush=True)
            if only is None:
                print(f"{keys:>4} {'state json (all)':<22} {best[1] / n * 1e6:>9.2f}", flush=True)
        if not args.no_db:
            spent = min(detect_cost(values, args.steps) for _ in range(args.repeat))
            print(f"{keys:>4} {'detect_batch (SQLite)':<22} {spent / n * 1e6:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
