"""The overflow: when the queue is full or behind, ``log()`` writes events to disk instead of
dropping them; they are sent in order; what the disk refuses is counted and reported."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

from runcast.sender import overflow
from runcast.cli.main import app
from runcast.sender.spool import find_spools
from sdk_receiver import Receiver, free_port
from typer.testing import CliRunner


def metric_steps(receiver: Receiver) -> list[int]:
    return [e["step"] for e in receiver.of_type("metrics")]


def test_a_full_queue_spills_to_disk_and_everything_arrives_in_order(make_run, receiver, tmp_path):
    run = make_run(max_queue=10, batch_size=1000, flush_interval=30.0)
    for step in range(20):
        run.log({"a": float(step)})  # never blocks, never raises, never drops
    stats = run.stats
    assert (stats.logged, stats.queued, stats.spilled, stats.dropped) == (20 + 1, 10, 11, 0)
    [spool] = find_spools(tmp_path / "spool")
    assert (spool / overflow.FILE).exists()
    run.finish()
    assert metric_steps(receiver) == list(range(20))
    assert [e["seq"] for e in receiver.events()] == list(range(22))  # run_started, 20 metrics, finished
    assert run.stats.sent == 22 and not run.stats.has_hole
    assert not spool.exists()  # delivered: the spool directory and its overflow file are gone


def test_a_burst_far_beyond_the_queue_is_kept_whole(make_run, receiver):
    run = make_run(max_queue=1000, batch_size=500)
    for step in range(30_000):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    assert run.stats.spilled > 0 and run.stats.dropped == 0
    assert run.flush(timeout=120)
    run.log({"loss": 0.0}, step=30_000)  # back to the in-memory queue afterwards
    run.finish()
    assert metric_steps(receiver) == list(range(30_001))


def test_a_sender_behind_by_two_flush_intervals_starts_spilling(make_run, receiver):
    """The queue is far from full but its oldest event waits on a slow server: log() writes to disk,
    so a crash would not take more than that with it."""
    receiver.mode, receiver.delay = "slow", 3.0
    run = make_run(flush_interval=0.05, batch_size=1)
    run.log({"a": 0.0}, step=0)
    receiver.wait_for(lambda: receiver.requests >= 1)
    for step in range(1, 60):
        run.log({"a": float(step)}, step=step)
        time.sleep(0.05)
    assert run.stats.spilled > 0 and run.stats.queued < 60
    receiver.mode = "ok"
    run.finish(timeout=30)
    assert metric_steps(receiver) == list(range(60))


def test_an_unwritable_disk_drops_counted_logged_once_and_reported(make_run, receiver, tmp_path, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with caplog.at_level(logging.WARNING, logger="runcast"):
        run = make_run(max_queue=10, batch_size=1000, flush_interval=30.0, spool_dir=blocker / "spool")
        for step in range(20):
            run.log({"a": float(step)})
    # The queue holds run_started and 9 points; the first drop wakes the sender, which may
    # empty the queue before the loop ends (a busy machine), so later steps can fit again.
    dropped = run.stats.dropped
    assert 1 <= dropped <= 11 and run.stats.has_hole
    assert sum("overflow file" in r.getMessage() for r in caplog.records) == 1
    receiver.wait_for(lambda: receiver.of_type("heartbeat"))
    run.finish()
    steps = metric_steps(receiver)
    assert steps[:9] == list(range(9)) and steps == sorted(set(steps)) and len(steps) + dropped == 20
    # The service hears about the hole: at once in a heartbeat (after the events queued
    # before it), and in the finished event.
    lost = [e.get("lost") for e in receiver.of_type("heartbeat")]
    assert lost == sorted(set(lost)) and lost[-1] == dropped
    assert [e["type"] for e in receiver.events()][:2] == ["run_started", "metrics"]
    assert receiver.of_type("finished")[0]["lost"] == dropped


DRIVER = """
import os, sys, runcast
run = runcast.init("sdk-tests", "killed", server=sys.argv[1], token="t", capture_code=False,
                   max_queue=100, retry_initial=30.0, retry_max=30.0)
print(run.id, run.segment, flush=True)
for step in range(1_000_000):
    run.log({"a": float(step)}, step=step)
    if step % 1000 == 0:
        open(sys.argv[2] + ".tmp", "w").write(str(step))
        os.replace(sys.argv[2] + ".tmp", sys.argv[2])
"""


def test_kill_9_while_spilling_then_runcast_sync_sends_the_rest(tmp_path, receiver):
    """The service is down, the queue full: the events on disk survive kill -9 and
    `runcast sync` sends them after the spooled batches, in order."""
    down = f"http://127.0.0.1:{free_port()}"
    progress = tmp_path / "progress"
    env = {**os.environ, "RUNCAST_SPOOL_DIR": str(tmp_path / "spool"), "HOME": str(tmp_path)}
    env.pop("RUNCAST_SERVER", None)
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, down, str(progress)], env=env,
                            stdout=subprocess.PIPE, text=True)
    run_id, segment = proc.stdout.readline().split()
    deadline = time.monotonic() + 60
    while not (progress.exists() and int(progress.read_text()) >= 100_000):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    logged = int(progress.read_text())
    [spool] = find_spools(tmp_path / "spool")
    assert (spool / overflow.FILE).exists()
    result = CliRunner().invoke(app, ["sync", str(tmp_path / "spool"), "--server", receiver.url, "--token", "t"])
    assert result.exit_code == 0, result.output
    steps = metric_steps(receiver)
    assert steps == list(range(len(steps)))  # in order, no gap, no repeat
    # Lost: at most what was in memory (the queue, the records not yet written) and the last
    # fraction of a second of logging before the kill.
    assert len(steps) >= logged - 100 - overflow.WRITE_EVERY - 1000, (len(steps), logged)
    assert not spool.exists()
