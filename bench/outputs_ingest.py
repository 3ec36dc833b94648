"""Metrics ingest alone, and with samples, images and histograms logged beside it (issue 25), paired.

    .venv/bin/python bench/outputs_ingest.py --rounds 4 --steps 100000 --interval 0.1

Each repeat starts a fresh embedded ``runcast serve`` (its own data dir) and a trainer process
that logs ``--steps`` steps x 7 floats with the SDK (default settings but a queue that holds the
series) and calls ``finish()``. Arm ``alone`` logs only that; arm ``beside`` logs the same
metrics and, every ``--interval`` seconds of the loop, 16 samples (outputs of about 500
characters), one image (a 256 x 256 RGB numpy array of noise: a PNG of about 197 kB, which does
not compress), one histogram of 10^5 values and one evaluation of 4 tasks, all into the same run
(at the default 0.1 s, 2 MB/s of images and 160 samples/s: far denser than a trainer logs them),
and goes on logging them after the loop while more than 1,000 events wait in the SDK's queue, so
that the outputs stream beside the metrics for the whole ingest. Each round runs ``alone`` then ``beside``, so a
change in the machine's load hits both alike.

Printed per repeat: metric points/s from the first ``log()`` to ``finish()`` returning (every
point, sample, image and score is then stored: the embedded API stores a batch before its 202,
and ``finish()`` waits for the images' uploads; the stored counts are checked exactly), the
time of the logging loop alone, and the load average. Then the medians and ``beside``'s
throughput as a fraction of ``alone``'s, per round and over all.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("train/loss", "train/lr", "train/grad_norm", "train/tokens", "perf/mfu", "perf/step_s", "val/loss")
PROMPTS = 16
TASKS = ("hellaswag", "arc_easy", "piqa", "lambada_openai")


def client(args: argparse.Namespace) -> None:
    """The trainer (a child process): log, finish, print timings and counts as JSON."""
    import math
    import random

    import numpy as np
    import runcast

    rng = random.Random(25)
    words = ["the", "model", "a", "of", "and", "to", "in", "is", "was", "that", "river", "city", "light", "water", "stone", "bridge", "story", "token"]
    values = [{k: math.sin(i * 0.01 + j) + 2.0 for j, k in enumerate(KEYS)} for i in range(1024)]
    noise = np.random.default_rng(25)
    images = [noise.integers(0, 256, (256, 256, 3), dtype=np.uint8) for _ in range(4)]
    weights = noise.standard_normal(100_000).astype(np.float32)
    with tempfile.TemporaryDirectory() as spool:
        run = runcast.init("bench", f"outputs-ingest-{args.arm}", server=args.server, token=args.token,
                           spool_dir=spool, capture_code=False, heartbeat_interval=3600, max_queue=args.steps + 10)
        outputs = 0

        def log_outputs(step: int) -> None:
            nonlocal outputs
            run.log_samples([{"prompt_id": f"p{p:02d}", "prompt": f"Prompt {p}: tell a story",
                              "output": " ".join(rng.choice(words) for _ in range(110)),
                              "scores": {"len": 110.0}} for p in range(PROMPTS)], step=step)
            run.log_media("samples/grid", runcast.Image(images[outputs % 4], caption=f"step {step}"), step=step)
            run.log_media("weights/layer0", runcast.Histogram(weights * (1 + outputs / 100)), step=step)
            run.log_eval({t: {"acc": rng.random()} for t in TASKS}, step=step, suite="bench")
            outputs += 1

        begin = time.perf_counter()
        log, clock, next_at = run.log, time.perf_counter, begin + args.interval
        for step in range(args.steps):
            log(values[step & 1023], step=step)
            if args.arm == "beside" and step & 63 == 0 and clock() >= next_at:
                next_at += args.interval
                log_outputs(step)
        loop_s = clock() - begin
        while args.arm == "beside" and run.stats.queued > 1000:  # the metrics still on their way: outputs go on
            if clock() >= next_at:
                next_at += args.interval
                log_outputs(args.steps + outputs)  # a step of its own: one sample per prompt and step
            time.sleep(0.002)
        run.finish(timeout=600)
        done = time.perf_counter()
        print(json.dumps({"run": run.id, "seconds": done - begin, "loop_s": loop_s, "outputs": outputs,
                          "spooled": run.stats.spooled, "dropped": run.stats.dropped}))


def stored(data_dir: Path, run: str) -> dict[str, int]:
    db = next(data_dir.rglob("*.db"))
    with sqlite3.connect(db) as conn:
        count = lambda sql: conn.execute(sql, (run,)).fetchone()[0]  # noqa: E731
        return {"points": count("SELECT count(*) FROM points p JOIN series s ON s.id = p.series_id WHERE s.run_id = ?"),
                "samples": count("SELECT count(*) FROM samples WHERE run_id = ?"),
                "evals": count("SELECT count(*) FROM evals WHERE run_id = ?"),
                "media": count("SELECT count(*) FROM media WHERE run_id = ?")}


def one(arm: str, steps: int, interval: float) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "tests"))
    import services

    env = {"PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("trainer", "backend", "tests"))}
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        env["RUNCAST_DATA_DIR"] = str(data_dir)
        token = services.create_token(env, "bench")
        proc, base = services.start_api(env, Path(tmp) / "api.log", timeout=120)
        try:
            load0 = os.getloadavg()[0]
            out = subprocess.run([sys.executable, __file__, "--client", "--arm", arm, "--server", base, "--token", token,
                                  "--steps", str(steps), "--interval", str(interval)], env=services.child_env(env),
                                 capture_output=True, text=True)
            load1 = os.getloadavg()[0]
        finally:
            proc.stop(timeout=20)
        if out.returncode:
            raise RuntimeError(f"{arm}: the trainer exited {out.returncode}:\n{out.stderr[-3000:]}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        got = stored(data_dir, result["run"])
    n = result["outputs"]
    want = {"points": steps * len(KEYS), "samples": n * PROMPTS, "evals": n * len(TASKS), "media": n * 2}
    if got != want or result["spooled"] or result["dropped"]:
        raise RuntimeError(f"{arm}: stored {got}, expected {want}; {result}")
    return {"points_per_s": want["points"] / result["seconds"], "seconds": result["seconds"],
            "loop_s": result["loop_s"], "outputs": n, "load0": load0, "load1": load1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=100_000, help="steps x 7 floats per repeat")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between two rounds of outputs (arm beside)")
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--arm", choices=("alone", "beside"), help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args)
        return
    print(f"{args.steps} steps x {len(KEYS)} floats; beside: every {args.interval} s {PROMPTS} samples, "
          f"1 image, 1 histogram, 1 eval of {len(TASKS)} tasks; load at start {os.getloadavg()}", flush=True)
    results: dict[str, list[dict[str, float]]] = {"alone": [], "beside": []}
    for r in range(args.rounds):
        for arm in results:
            res = one(arm, args.steps, args.interval)
            results[arm].append(res)
            print(f"round {r + 1} {arm:6}: {res['points_per_s']:,.0f} metric points/s ({res['seconds']:.2f} s, loop "
                  f"{res['loop_s']:.2f} s, {res['outputs']} rounds of outputs; load {res['load0']:.2f}-{res['load1']:.2f})",
                  flush=True)
    ratios = [b["points_per_s"] / a["points_per_s"] for a, b in zip(results["alone"], results["beside"])]
    print()
    print("| arm | metric points/s, median | per repeat | loop s, median |")
    print("|---|---|---|---|")
    for arm, rs in results.items():
        print(f"| {arm} | {statistics.median(x['points_per_s'] for x in rs):,.0f} | "
              f"{', '.join(format(x['points_per_s'], ',.0f') for x in rs)} | {statistics.median(x['loop_s'] for x in rs):.2f} |")
    med = statistics.median(x["points_per_s"] for x in results["beside"]) / statistics.median(
        x["points_per_s"] for x in results["alone"])
    print(f"\nbeside / alone: {med:.3f} (medians); per round {', '.join(f'{x:.3f}' for x in ratios)}")
    print(f"load at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
