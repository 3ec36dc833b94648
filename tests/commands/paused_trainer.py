"""A training script for test_command_timing.py, run as a process of its own (so that the test can
kill it): the plain loop of docs/commands.md with a ``pause`` that holds the loop until ``resume``.
Its stall threshold (``alerts``) is shorter than the pause and its heartbeats come faster than that.

argv: server url, ingest token, file to write the run id to. Logs a step every 50 ms until killed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import runcast

STALL_AFTER_S = 3.0


def main(server: str, token: str, out: Path) -> None:
    run = runcast.init(project="pp", name="paused", server=server, token=token, mode="online", capture_code=False,
                       flush_interval=0.1, heartbeat_interval=0.5, alerts={"stall": {"after_s": STALL_AFTER_S}})
    run.tunable("lr_scale", 1.0, min=0.1, max=4.0)  # opts in: the team's commands reach run.commands()
    run.log({"loss": 1.0}, step=1)
    run.flush()
    out.write_text(run.id)
    paused = False
    step = 1
    while True:
        for cmd in run.commands():
            if cmd.kind in ("pause", "resume") and paused == (cmd.kind == "resume"):
                paused = cmd.kind == "pause"
                cmd.ack(step=step, message=f"{cmd.kind}d at step {step}")
            else:
                cmd.refuse(f"{cmd.kind} is not taken now", step=step)
        if not paused:
            step += 1
            run.log({"loss": 1.0 / step}, step=step)
        time.sleep(0.05)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
