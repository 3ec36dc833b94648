"""A real ``runcast train`` broadcast, and every public read of it, for the privacy tests.

The trainer runs under its own host name (a UTS namespace, ``unshare --uts``) where the
machine allows it, so the name is one no other text can contain by chance; otherwise it
keeps the machine's name and the search for it is bounded by non-identifier characters.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import httpx

HOST = "rc-privacy-host-q7x"
PROJECT = "privacy"


@lru_cache(maxsize=1)
def own_host_name() -> bool:
    """Whether ``unshare --uts`` can give the trainer a host name of its own here."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--uts", "--fork", "sh", "-c", f"hostname {HOST} && hostname"],
                           capture_output=True, text=True, timeout=30, check=False)
    return probe.returncode == 0 and probe.stdout.strip() == HOST


def trainer_host() -> str:
    return HOST if own_host_name() else socket.gethostname()


@dataclass
class Training:
    """A ``runcast train`` process broadcasting to ``url``; ``run_id`` once it said so."""

    proc: subprocess.Popen[str]
    out_dir: Path
    lines: list[str] = field(default_factory=list)
    run_id: str | None = None

    def wait_for_run(self, url: str, timeout: float = 240) -> str:
        """The run's id, once the server has stored its start."""
        deadline = time.time() + timeout
        assert self.proc.stdout is not None
        while self.run_id is None:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise AssertionError("the trainer never started its run:\n" + "".join(self.lines))
                continue
            self.lines.append(line)
            found = re.search(r"as run (\S+)", line)
            if found:
                self.run_id = found.group(1)
        while httpx.get(f"{url}/api/v1/runs/{self.run_id}", timeout=30).status_code != 200:
            if time.time() > deadline:
                raise AssertionError(f"run {self.run_id} never reached the server")
            time.sleep(0.1)
        return self.run_id

    def pause(self) -> None:
        """Stop the trainer (its whole process group) where it is; ``resume`` lets it go on."""
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)

    def finish(self, timeout: float = 300) -> str:
        self.resume()
        out, _ = self.proc.communicate(timeout=timeout)
        self.lines.append(out)
        assert self.proc.returncode == 0, "".join(self.lines)
        return "".join(self.lines)


def start_training(url: str, token: str, out_dir: Path, tmp: Path, *extra: str) -> Training:
    """A small real training run (30 steps, checkpoints every 10, a loss spike from step 16)."""
    argv = [sys.executable, "-m", "runcast.cli.main", "train", "--server", url, "--token", token,
            "--project", PROJECT, "--name", "private-by-default", "--out-dir", str(out_dir),
            "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "32", "--batch-size", "4",
            "--data-limit", "40", "--max-steps", "30", "--ckpt-interval", "10", "--eval-interval", "10",
            "--eval-iters", "1", "--keep-last", "2", "--keep-best", "0", "--inject-spike-at", "15", "--spike-factor", "1000",
            *extra]
    if own_host_name():
        argv = ["unshare", "--uts", "--fork", "sh", "-c", f'hostname {HOST} && exec "$@"', "sh", *argv]
    tmp.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNCAST_")}
    env.update({"RUNCAST_SPOOL_DIR": str(tmp / "spool"), "PYTHONUNBUFFERED": "1"})
    # cwd outside any git checkout: the code revision (and its diff) is tested elsewhere
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp,
                            start_new_session=True)  # its own process group, for pause()
    return Training(proc, out_dir)


class StreamReader:
    """Reads ``/runs/{id}/stream`` in a thread until a frame says the run finished."""

    def __init__(self, url: str, run_id: str, *, token: str | None = None, last_event_id: int | None = None) -> None:
        self.body = b""
        self.error: BaseException | None = None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        params = {} if last_event_id is None else {"last_event_id": str(last_event_id)}
        self._args = (f"{url}/api/v1/runs/{run_id}/stream", headers, params)
        self.connected = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        target, headers, params = self._args
        try:
            with httpx.stream("GET", target, headers=headers, params=params, timeout=httpx.Timeout(10, read=400)) as r:
                for chunk in r.iter_bytes():
                    self.body += chunk
                    if b"\n\n" in self.body:
                        self.connected.set()
                    if re.search(rb'"status":"(finished|failed|killed)"', self.body):
                        return
        except BaseException as exc:  # noqa: BLE001 - reported by text()
            self.error = exc
        finally:
            self.connected.set()

    def text(self, timeout: float = 120) -> str:
        self.thread.join(timeout)
        assert not self.thread.is_alive() and self.error is None, (
            f"stream did not end: {self.error!r}; it ended with {self.body[-600:]!r}")
        return self.body.decode()


def public_reads(api: httpx.Client, run_id: str) -> dict[str, str]:
    """Every public read route of the run (and its project), by name: the response text."""
    def get(path: str, **params: Any) -> str:
        r = api.get(path, params=params)
        assert r.status_code == 200, (path, r.status_code, r.text)
        return r.text

    run = f"/runs/{run_id}"
    out = {
        "run": get(run),
        "runs": get("/runs", project=PROJECT),
        "events": get(f"{run}/events", limit=1000),
        "checkpoints": get(f"{run}/checkpoints"),
        "alerts": get(f"{run}/alerts"),
        "run feed": get(f"{run}/alerts.atom"),
        "project feed": get(f"/projects/{PROJECT}/alerts.atom"),
        "manifests": get(f"{run}/manifests"),
        "revisions": get(f"{run}/revisions"),
        "data mix": get(f"{run}/data-mix"),
        "metrics": get(f"{run}/metrics", key="train/loss"),
        "export jsonl": get(f"{run}/export", format="jsonl"),
        "export csv": get(f"{run}/export", format="csv"),
        "plot svg": get(f"{run}/plot.svg", key="train/loss"),
        "badge": get(str(api.base_url).rstrip("/").removesuffix("/api/v1") + f"/badge/runs/{run_id}.svg",
                     key="train/loss"),
        "embed page": get(str(api.base_url).rstrip("/").removesuffix("/api/v1") + f"/embed/runs/{run_id}",
                          key="train/loss"),
    }
    for c in api.get(f"{run}/checkpoints").json()["checkpoints"]:
        out[f"card {c['id']}"] = get(f"{run}/checkpoints/{c['id']}/card")
    for m in api.get(f"{run}/manifests").json()["manifests"]:
        out[f"manifest {m['version']}"] = get(f"{run}/manifests/{m['version']}")
    return out


def leaks(text: str, secrets: dict[str, str]) -> list[str]:
    """Which of ``secrets`` (name -> literal) occur in ``text`` as a whole token."""
    found = []
    for name, value in secrets.items():
        pattern = re.escape(value)
        if value.isdigit():
            pattern = rf"(?<![\w.]){pattern}(?![\w.])"
        elif re.fullmatch(r"[\w-]+", value):
            pattern = rf"(?<![\w-]){pattern}(?![\w-])"
        if re.search(pattern, text):
            found.append(name)
    return found
