"""From the user's seat, on a real embedded ``runcast serve``: what a trainer could not send ends in
its spool and ``runcast sync`` stores every point of it, exactly once.

* A burst far beyond what the server takes before a short ``finish_timeout``: the trainer's
  terminal names the count and the command; the run's API says events wait in a spool; the
  command as printed stores every point, and the run ends finished with nothing spooled.
* ``kill -9`` in the middle of a burst: every point that reached the disk (the spool, the
  overflow file) or the server is stored after ``runcast sync``, in order, none twice.

Both cases make spooled batches far larger than the server's 20,000-event limit (the overflow
file becomes one list of records), which ``runcast sync`` used to count as refused and delete.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from runcast.sender import overflow
from runcast.sender.spool import Spool, find_spools
from runcast.wire.events import MAX_BATCH_EVENTS
from services import BIN, child_env

from integration.helpers import export_rows, get_run
from integration.test_embedded import make_token

pytestmark = pytest.mark.slow

BURST = 300_000
QUEUE = 100_000  # init()'s default max_queue
# The killed burst logs 4 keys a step: the server stores a step's points 4 times slower, the loop logs
# them about as fast, so its queue overflows to disk whatever the two speeds (one key a step, a loaded
# machine's loop no longer outran the server once batches grew to 20,000 steps).
KILL_KEYS = 4
KILL_AT = 100_000

TRAINER = """
import os, sys, time, runcast
steps, progress, keys = int(sys.argv[1]), sys.argv[2], int(sys.argv[4])
run = runcast.init(name="burst", config={"lr": 3e-4}, finish_timeout=float(sys.argv[3]), system_metrics=False,
                   capture_code=False)
print(run.id, run.segment, flush=True)
names = ["train/loss", *(f"train/k{i}" for i in range(1, keys))]
for step in range(steps):
    run.log(dict.fromkeys(names, 1.0 / (step + 1)), step=step)
    if step % 1000 == 999:  # written whole (a rename): a kill -9 or a read never finds it half written
        with open(progress + ".tmp", "w") as f:
            f.write(str(step + 1))
        os.replace(progress + ".tmp", progress)
run.finish()
"""


def _serve(processes: Any) -> tuple[str, str, dict[str, str]]:
    data_dir = processes.tmp / "data"
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir)}
    processes.start_api()
    token = make_token(processes.env, "burst", data_dir)
    env = child_env({"RUNCAST_SERVER": processes.api_url, "RUNCAST_TOKEN": token,
                     "RUNCAST_SPOOL_DIR": str(processes.tmp / "spool"), "HOME": str(processes.tmp)})
    return processes.api_url, token, env


def _trainer(env: dict[str, str], steps: int, finish_timeout: float, progress: Path,
             keys: int = 1) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", TRAINER, str(steps), str(progress), str(finish_timeout), str(keys)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _sync(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "runcast"), "sync", *args, "-q"], env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def _stored_steps(url: str, run: str, token: str) -> list[int]:
    return sorted(r["step"] for r in export_rows(url, run, token, key="train/loss"))


def test_a_burst_past_a_short_finish_timeout_then_the_printed_sync_stores_every_point(processes):
    url, token, env = _serve(processes)
    # 10 ms: the burst's last batches cannot all be stored by then, however fast the server (with
    # 0.5 s, a fast server and the SDK's read ahead sometimes stored everything in time).
    trainer = _trainer(env, BURST, 0.01, processes.tmp / "progress")
    out, err = trainer.communicate(timeout=600)
    assert trainer.returncode == 0, err
    run_id, _segment = out.split()
    said = re.search(r"could not send everything within 0.01 s: ([\d,]+) events are kept on disk in (\S+)\. "
                     r"Send them with: (runcast sync \S+)$", err, re.M)
    assert said, err
    [spool] = find_spools(processes.tmp / "spool")
    assert said[2] == str(spool)
    detail = get_run(url, run_id).json()  # anyone reading the run learns that points are still to come
    assert detail["spooled_events"] == int(said[1].replace(",", "")) > 0
    assert detail["status"] == "running"

    command = said[3].split()  # the command as the trainer printed it, word for word
    synced = _sync(env, *command[2:])
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert _stored_steps(url, run_id, token) == list(range(BURST))  # every point, once
    detail = get_run(url, run_id).json()
    assert detail["status"] == "finished"
    assert detail["spooled_events"] == 0 and detail["lost_events"] == 0
    assert not spool.exists()


def _settled_steps(url: str, run: str, token: str) -> set[int]:
    """The steps stored once the server is done with what it received before the kill: a request whose
    body had arrived is stored whole after its sender died (read until two reads 0.5 s apart agree)."""
    steps = set(_stored_steps(url, run, token))
    while True:
        time.sleep(0.5)
        again = set(_stored_steps(url, run, token))
        if again == steps:
            return steps
        steps = again


def _spilling(root: Path) -> bool:
    """A live trainer's overflow file under ``root`` holds something (its spool directory is locked)."""
    return any((spool / overflow.FILE).is_file() and (spool / overflow.FILE).stat().st_size > 0
               for spool in find_spools(root))


def _on_disk(spool: Path) -> set[int]:
    """The steps a dead trainer left in its spool directory: spooled batches and the overflow file."""
    steps = set()
    holder = Spool.open(spool)
    try:
        for _body, events, _end in holder.pending():
            steps.update(e["step"] for e in events if e["type"] == "metrics")
    finally:
        holder.close()
    found = overflow.leftover(spool)
    if found is not None:
        steps.update(r[3] for r in found[0] if r[1] == "metrics")
    return steps


def test_kill_9_in_a_burst_then_sync_stores_every_point_that_reached_the_disk(processes):
    url, token, env = _serve(processes)
    progress = processes.tmp / "progress"
    trainer = _trainer(env, 5_000_000, 30.0, progress, keys=KILL_KEYS)
    run_id, _segment = trainer.stdout.readline().split()
    deadline = time.monotonic() + 120
    # Killed once the burst is logged and the SDK has begun spilling to disk: the loop logs faster
    # than the server stores (5,000,000 steps), but how soon its queue overflows depends on both speeds.
    while not (progress.exists() and progress.read_text() and int(progress.read_text()) >= KILL_AT
               and _spilling(processes.tmp / "spool")):
        assert time.monotonic() < deadline and trainer.poll() is None
        time.sleep(0.02)
    os.kill(trainer.pid, signal.SIGKILL)
    trainer.wait(10)
    logged = int(progress.read_text())

    [spool] = find_spools(processes.tmp / "spool")
    on_server = _settled_steps(url, run_id, token)
    on_disk = _on_disk(spool)
    assert on_disk, "the burst outran the server: events must have gone to the disk"
    synced = _sync(env, str(spool))
    assert synced.returncode == 0, synced.stdout + synced.stderr
    stored = _stored_steps(url, run_id, token)
    assert len(stored) == len(set(stored))  # none twice
    assert set(stored) == on_server | on_disk  # every point that reached the disk or the server
    # lost: at most what was in memory (the queue, the batch in flight and the one encoded ahead, records
    # not yet written) and the last progress step
    assert len(stored) >= logged - QUEUE - 2 * MAX_BATCH_EVENTS - overflow.WRITE_EVERY - 1000, (len(stored), logged)
    assert not spool.exists()
    assert httpx.get(f"{url}/api/v1/runs/{run_id}", timeout=30).json()["spooled_events"] == 0
