"""A training process that publishes one checkpoint: ``python upload_driver.py SERVER TOKEN PATH STEP OUT [RUN] [BW]``.

Prints ``run <id>`` as soon as the run exists, then checkpoints PATH at STEP, finishes,
and writes ``run.stats.uploads`` to OUT as JSON. RUN resumes that run; BW caps the upload
in bytes per second. Used by test_upload_processes.py and bench/upload_throughput.py.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time

import runcast


def main(server: str, token: str, path: str, step: str, out: str, resume: str = "", bandwidth: str = "") -> None:
    run = runcast.init("demo", "uploader", server=server, token=token, capture_code=False, flush_interval=0.05,
                       resume=resume or None, retry_initial=0.2, retry_max=1.0,
                       upload_bandwidth=float(bandwidth) if bandwidth else None)
    print("run", run.id, flush=True)
    run.log({"loss": 1.0})
    started = time.monotonic()
    run.checkpoint(path, step=int(step))
    run.finish(timeout=120)
    stats = {**dataclasses.asdict(run.stats.uploads), "seconds": time.monotonic() - started}
    with open(out, "w") as f:
        json.dump(stats, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
