"""A training process that starts or resumes runs, then dies: ``python resume_driver.py SPEC``.

SPEC is JSON: ``{"server", "token", "runs": [{"init": {...}, "steps": n, "finish": null | "finished" |
"failed", "env": {...}}]}``. Each run is ``runcast.init(server=, token=, **init)`` (``init`` may name another server) (with ``env`` set
around it), logs ``steps`` losses without ``step=`` (so a resume counts on from its resume step),
is flushed, and finished with that status when given. Then the process prints the run ids as a
JSON list and exits at once (``os._exit``): the runs left open end as a killed trainer's do, with
no ``finished`` event. Used by test_stall_resumes.py.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import runcast


def start(server: str, token: str, spec: dict[str, Any]) -> str:
    env = spec.get("env") or {}
    os.environ.update(env)
    try:
        run = runcast.init(reinit="create_new",  # the runs left open stay open, as a killed trainer's
                           **{"server": server, "token": token, "capture_code": False, "flush_interval": 0.05,
                              "heartbeat_interval": 3600, "retry_initial": 0.05, "retry_max": 0.2, "start_timeout": 2,
                              **spec["init"]})
    finally:
        for key in env:
            os.environ.pop(key, None)
    for i in range(spec.get("steps", 3)):
        run.log({"loss": 2.0 / (i + 1)})
    run.flush(timeout=30)
    if spec.get("finish"):
        run.finish(spec["finish"], timeout=30)
    return run.id


def main(path: str) -> None:
    with open(path) as f:
        spec = json.load(f)
    ids = [start(spec["server"], spec["token"], run) for run in spec["runs"]]
    print(json.dumps(ids), flush=True)
    os._exit(0)  # no atexit: the open runs get no finished event


if __name__ == "__main__":
    main(sys.argv[1])
