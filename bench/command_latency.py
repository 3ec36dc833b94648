"""Command delivery latency: a team's ``POST /runs/{id}/commands`` -> the trainer's acknowledgement stored.

    .venv/bin/python bench/command_latency.py [--trials 40] [--steps-per-s 10]

Starts the embedded server (``runcast serve``: SQLite, no worker; tests/services.py), then a
training loop with the SDK's default settings (``runcast.init``, nothing tuned) logging a step
every 1/``--steps-per-s`` seconds and polling ``run.commands()`` after each ``run.log``. A second
thread sends one ``checkpoint`` command at a time (a random pause of 0..1 s between them, so
sends fall anywhere in a step) and waits for its acknowledgement. The latency is the server's
``acked_at`` (when the ``command_ack`` event's batch was stored) minus the wall clock just before
the POST; both clocks are this machine's. Prints a table of p50, p95 and max.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import httpx
import runcast
import services


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def send_commands(base: str, token: str, run: str, trials: int, out: list[float], done: threading.Event) -> None:
    """Send ``trials`` commands one at a time; append each one's send -> acknowledgement seconds."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"{base}/api/v1", headers=headers, timeout=30) as http:
        for _ in range(trials):
            time.sleep(random.uniform(0.0, 1.0))
            t0 = time.time()
            sent = http.post(f"/runs/{run}/commands", json={"kind": "checkpoint", "reason": "bench"})
            sent.raise_for_status()
            uid = sent.json()["command"]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                listed = {c["command"]: c for c in http.get(f"/runs/{run}/commands").json()["commands"]}
                if listed[uid]["acked_at"] is not None:
                    out.append(listed[uid]["acked_at"] - t0)
                    break
                time.sleep(0.05)
            else:
                raise SystemExit(f"command {uid} was not acknowledged in 60 s")
    done.set()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--steps-per-s", type=float, default=10.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="runcast-command-latency-"))
    env = {"RUNCAST_DATA_DIR": str(tmp / "data")}
    token = services.create_token(env, "bench")  # every scope: it ingests and sends
    api, base = services.start_api(env, tmp / "api.log")
    try:
        run = runcast.init(project="bench", server=base, token=token, spool_dir=str(tmp / "spool"))
        latencies: list[float] = []
        done = threading.Event()
        sender = threading.Thread(target=send_commands, args=(base, token, run.id, args.trials, latencies, done),
                                  daemon=True)
        step, period = 0, 1.0 / args.steps_per_s
        next_at = time.monotonic()
        sender.start()
        while not done.is_set():
            step += 1
            run.log({"loss": 1.0 / step}, step=step)
            for command in run.commands():
                command.ack(step=step, message="noted")
            next_at += period
            time.sleep(max(0.0, next_at - time.monotonic()))
        run.finish()
    finally:
        api.stop()
    ms = [x * 1000 for x in latencies]
    print(f"{'trials':>6}  {'steps/s':>7}  {'p50 ms':>7}  {'p95 ms':>7}  {'max ms':>7}  {'mean ms':>7}")
    print(f"{len(ms):>6}  {args.steps_per_s:>7g}  {percentile(ms, 0.5):>7.0f}  {percentile(ms, 0.95):>7.0f}  "
          f"{max(ms):>7.0f}  {statistics.mean(ms):>7.0f}")


if __name__ == "__main__":
    main()
