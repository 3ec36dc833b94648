"""Process-level behaviour, each in a child process: import cost, exit, crash, SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from sdk_receiver import Receiver

PRELUDE = """
import os, signal, sys, time
import runcast
run = runcast.init("sdk-tests", "child", server=os.environ["URL"], token="t", spool_dir=os.environ["SPOOL"],
                   flush_interval=0.05, capture_code=False)
run.log({"x": 1.0}, step=0)
"""


def _child(body: str, receiver: Receiver, tmp_path, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "URL": receiver.url, "SPOOL": str(tmp_path)}
    env.pop("RANK", None)
    return subprocess.Popen(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs,
    )


def _statuses(receiver: Receiver) -> list[str]:
    return [e["status"] for e in receiver.of_type("finished")]


def test_import_needs_neither_torch_nor_numpy_nor_celery():
    code = "import sys, runcast; print(sorted(m for m in ('torch', 'numpy', 'celery', 'kombu') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_exit_without_finish_finishes(receiver, tmp_path):
    child = _child("", receiver, tmp_path)
    assert child.wait(30) == 0
    assert _statuses(receiver) == ["finished"]
    assert [e["type"] for e in receiver.events()] == ["run_started", "metrics", "finished"]


def test_uncaught_exception_finishes_as_failed_and_keeps_the_previous_hook(receiver, tmp_path):
    child = _child('raise ValueError("diverged")', receiver, tmp_path)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 1
    assert "ValueError: diverged" in err  # the default excepthook still printed the traceback
    assert _statuses(receiver) == ["failed"]


def test_sigterm_finishes_as_killed_then_dies_of_sigterm(receiver, tmp_path):
    child = _child('print("ready", flush=True); time.sleep(60)', receiver, tmp_path)
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    assert child.wait(30) == -signal.SIGTERM
    assert _statuses(receiver) == ["killed"]


def test_sigterm_chains_to_the_previous_handler(receiver, tmp_path):
    body = """
    print("ready", flush=True)
    time.sleep(60)
    """
    handler = """
import signal, sys
def previous(signum, frame):
    print("previous handler ran", flush=True)
    sys.exit(3)
signal.signal(signal.SIGTERM, previous)
"""
    env = {**os.environ, "URL": receiver.url, "SPOOL": str(tmp_path)}
    env.pop("RANK", None)
    child = subprocess.Popen(
        [sys.executable, "-c", handler + PRELUDE + textwrap.dedent(body)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 3 and "previous handler ran" in out
    assert _statuses(receiver) == ["killed"]


@pytest.mark.parametrize("rank", ["1", "0"])
def test_rank_from_env_in_a_real_process(receiver, tmp_path, rank):
    env = {**os.environ, "URL": receiver.url, "SPOOL": str(tmp_path), "RANK": rank, "WORLD_SIZE": "2"}
    subprocess.run([sys.executable, "-c", PRELUDE + "run.finish()"], env=env, check=True, timeout=30)
    if rank == "1":
        assert receiver.requests == 0
    else:
        [started] = receiver.of_type("run_started")
        assert started["env"]["world_size"] == 2
