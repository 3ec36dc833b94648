"""A tiny "training job" for the integration tests: logs through the real SDK in its own process.

    python sdk_driver.py --server URL --token T --project P --steps N --metrics K [options]

Prints one JSON line ``{"run": <id>}`` once the run exists and ``{"done": true, ...}`` after
``finish()``. ``--defaults`` keeps the SDK's own batching, queue and retry settings.
With ``--progress FILE`` it writes the last logged step there every ``--progress-every``
steps, so a test can act (kill a process) at a known point.
Values are ``helpers.value_at(step, k)`` for metric ``m{k}``; with ``--special`` metric
``m0`` is NaN / +Inf / -Inf at the steps in ``helpers.SPECIAL``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import SPECIAL, value_at


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True, help="http(s):// API base")
    p.add_argument("--token", required=True)
    p.add_argument("--project", required=True)
    p.add_argument("--name", default="driver")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--metrics", type=int, default=1)
    p.add_argument("--special", action="store_true")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds between steps")
    p.add_argument("--progress", type=Path)
    p.add_argument("--progress-every", type=int, default=100)
    p.add_argument("--finish-timeout", type=float, default=600)
    p.add_argument("--max-queue", type=int, default=100_000)
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--defaults", action="store_true",
                   help="the SDK's own defaults for batching, queue, retries and finish (ignores the options above)")
    p.add_argument("--flush-timeout", type=float, default=0.0,
                   help="before finish(), wait up to this long until everything is delivered (spool replayed)")
    p.add_argument("--retry-max", type=float, default=2.0)
    a = p.parse_args()

    import runcast

    keys = [f"m{k}" for k in range(a.metrics)]
    tuning = {} if a.defaults else {
        "finish_timeout": a.finish_timeout,
        "max_queue": a.max_queue,
        "batch_size": a.batch_size,
        "retry_max": a.retry_max,  # come back quickly once the server is back (the restart tests)
    }
    run = runcast.init(
        project=a.project,
        name=a.name,
        config={"steps": a.steps, "metrics": a.metrics},
        server=a.server,
        token=a.token,
        **tuning,
    )
    print(json.dumps({"run": run.id}), flush=True)
    t0 = time.monotonic()
    for step in range(a.start, a.start + a.steps):
        values = {key: value_at(step, k) for k, key in enumerate(keys)}
        if a.special and step in SPECIAL:
            values["m0"] = SPECIAL[step]
        run.log(values, step=step)
        if a.progress and (step % a.progress_every == 0 or step == a.start + a.steps - 1):
            tmp = a.progress.with_name(a.progress.name + ".tmp")
            tmp.write_text(str(step))
            tmp.replace(a.progress)  # a reader never sees it half written
        if a.sleep:
            time.sleep(a.sleep)
    logged = time.monotonic() - t0
    deadline = time.monotonic() + a.flush_timeout
    while a.flush_timeout and not run.flush(timeout=5) and time.monotonic() < deadline:
        time.sleep(0.5)  # flush() is True once nothing is left unsent (the spool replayed too)
    run.finish()
    stats = run.stats
    print(json.dumps({"done": True, "log_s": round(logged, 3), "total_s": round(time.monotonic() - t0, 3),
                      "stats": dataclasses.asdict(stats)}), flush=True)
    if stats.dropped or stats.queued:
        print(f"the SDK dropped {stats.dropped} and still holds {stats.queued} events", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
