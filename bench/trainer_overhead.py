"""What broadcasting every step costs the reference trainer, and what a server outage loses.

    .venv/bin/python bench/trainer_overhead.py [--pairs 12] [--steps 200] [--outage-steps 150]

Part 1, overhead. The reference trainer (``runcast.train.train`` with its default
TrainConfig; only evaluation and checkpoints are moved past the last step) runs in a
fresh child process per run, alternately *off* (``OfflineRun``: what ``runcast train``
does without ``--server``, nothing sent or spooled) and *on* (``open_run``, the
trainer's own, logging its 7 per-step metrics to an embedded ``runcast serve`` on
127.0.0.1 started once for the whole bench). Same seed, same data, same steps. Pairs are
ordered ABBA (off,on / on,off / ...) so a linear drift in machine load cancels.

Step time is measured inside the process: a thin wrapper around the run object records
``perf_counter`` and ``process_time`` at each per-step ``run.log`` call, so one interval
is a whole loop iteration (the compute, the trainer's own bookkeeping and the previous
``run.log``), the sender thread's work included, start-up and the final flush excluded.
The first ``--warmup`` intervals of each run are dropped. Per run: median and mean wall
time per step and mean process CPU time per step (all threads of the trainer; less
sensitive to other jobs' load than wall time). Per pair: the on/off ratio. Reported:
the median ratio over pairs and a 95% bootstrap confidence interval (10,000 resamples of
the pairs). The server's own CPU time per step is reported separately: on one machine it
competes with the trainer for the same cores, which the *on* wall time includes.

Part 2, outages (in this process, logging on, the trainer's ``open_run`` defaults):
``down-whole`` (no server for the whole run; afterwards the server is started again and
``runcast sync`` replays the spool), ``down-middle`` (server stopped with SIGTERM at step
``--outage-from``, started again on the same port and data ``--outage-s`` seconds later;
the outage reported runs until it answers /healthz again) and ``hung-middle`` (server
process group SIGSTOPped for ``--outage-s`` seconds, then SIGCONTed: connections are
accepted by the kernel but never answered, so sends time out after the SDK's 10 s). Checked: the trainer ran every step,
its step times inside vs outside the outage window, and, through the REST API
(``GET /api/v1/runs/{id}/metrics``, raw level), that each of the 7 per-step metrics has
exactly one point at every step 1..N. "Steps lost" = steps not executed + steps with a
missing point.

Threads: torch gets ``--threads`` intra-op threads (default 1). On a 2-core machine
shared with other jobs (load average 5-11), 2 OpenMP threads spend most of each step
waiting at barriers for a descheduled partner (about 1 s a step instead of 0.1 s), which
would drown any logging cost in noise; the choice applies to both arms alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # services.py: the test suite's server helpers

import services

STEP_KEYS = ("train/loss", "lr", "grad_norm", "tokens_seen", "tokens_per_s", "step_time_s", "memory/rss_bytes")
PROJECT = "overhead"


# --- the timing wrapper (used by both arms alike) ---------------------------------------------


class NullTransport:
    """Accepts every batch at once (the ``null`` diagnostic arm: the SDK's work, no server)."""

    url = "null://"

    def send(self, body: bytes, events: list[dict[str, Any]], timeout: float) -> None:
        pass

    def close(self) -> None:
        pass


class TimedRun:
    """Passes every call to ``inner``; stamps wall and CPU time at each per-step ``log``."""

    def __init__(self, inner: Any, on_step: Any = None) -> None:
        self.inner = inner
        self.id = getattr(inner, "id", None)
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.steps: list[int] = []
        self.on_step = on_step
        self.finish_kwargs: dict[str, Any] = {}
        self.compute_s: list[float] = []  # the trainer's own step_time_s (forward, backward, optimizer)
        self.log_call_s: list[float] = []  # time inside the inner run.log of each step (training thread)
        self.sender_cpu: list[float] = []  # the SDK sender thread's CPU clock at each stamp
        sender = getattr(getattr(inner, "_sender", None), "_thread", None)  # bench-only peek at the SDK
        self._sender_clock = time.pthread_getcpuclockid(sender.ident) if sender is not None else None

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        if "train/loss" not in metrics:
            self.inner.log(metrics, step=step)
            return
        self.wall.append(time.perf_counter())
        self.cpu.append(time.process_time())
        if self._sender_clock is not None:
            self.sender_cpu.append(time.clock_gettime(self._sender_clock))
        self.steps.append(step)
        self.compute_s.append(float(metrics["step_time_s"]))
        if self.on_step is not None:
            self.on_step(step)
        t0 = time.perf_counter()
        self.inner.log(metrics, step=step)
        self.log_call_s.append(time.perf_counter() - t0)

    def finish(self, status: str = "finished", **kwargs: Any) -> None:
        self.inner.finish(status=status, **{**self.finish_kwargs, **kwargs})

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def intervals(self, warmup: int) -> tuple[list[float], list[float]]:
        wall = [b - a for a, b in zip(self.wall, self.wall[1:])][warmup:]
        cpu = [b - a for a, b in zip(self.cpu, self.cpu[1:])][warmup:]
        return wall, cpu

    def sdk_cost(self, warmup: int) -> dict[str, float]:
        """Per measured interval: mean time in run.log and sender-thread CPU (seconds)."""
        n = len(self.wall) - 1 - warmup
        calls = self.log_call_s[warmup:-1]  # the call that opens each measured interval
        sender = (self.sender_cpu[-1] - self.sender_cpu[warmup]) / n if self.sender_cpu else 0.0
        return {"log_call": sum(calls) / n, "sender_cpu": sender}


def bench_config(steps: int, out_dir: str, server: str | None = None, token: str | None = None, name: str = "bench"):
    from runcast.train import TrainConfig

    # Defaults otherwise (model 2x128, batch 8, context 64, full local corpus, seed 1337);
    # evaluation and checkpoints only after the last step (they are the same in both arms).
    return TrainConfig(out_dir=out_dir, max_steps=steps, eval_interval=10**9, ckpt_interval=10**9,
                       project=PROJECT, name=name, server=server, token=token)


def open_trainer_run(cfg: Any) -> Any:
    """The trainer's own ``open_run`` (what ``runcast train --server`` does)."""
    from runcast.train.model import GPT, GPTConfig
    from runcast.train.trainer import open_run

    n_params = GPT(GPTConfig(cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size, 256, cfg.dropout)).num_params()
    return open_run(cfg, n_params, None, lambda *_: None)


# --- part 1: one run in a child process -----------------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    from runcast.train import train
    from runcast.train.trainer import OfflineRun

    with tempfile.TemporaryDirectory() as tmp:
        cfg = bench_config(args.steps, tmp, args.server, args.token, name=f"overhead-{args.arm}")
        if args.arm == "on":
            inner = open_trainer_run(cfg)
        elif args.arm == "null":  # open_run's runcast.init, with a transport that discards batches
            import runcast

            inner = runcast.init(cfg.project, cfg.name, config={"arm": "null"}, transport=NullTransport(),
                                 token="unused", seed=cfg.seed, visibility=cfg.visibility)
        else:
            inner = OfflineRun()
        run = TimedRun(inner)
        summary = train(cfg, run=run, log=lambda *_: None)
    wall, cpu = run.intervals(args.warmup)
    sdk = run.sdk_cost(args.warmup)
    stats = run.inner.stats if args.arm != "off" else None
    print(json.dumps({
        "arm": args.arm, "steps": summary["step"], "run_id": run.id, "wall": wall, "cpu": cpu, "sdk": sdk,
        "compute": run.compute_s[args.warmup + 1:],
        "final_loss": summary["losses"][summary["step"]],
        "stats": dataclasses.asdict(stats) if stats is not None else None,
    }))


# --- helpers -----------------------------------------------------------------------------------


def group_cpu_seconds(pgid: int) -> float:
    """utime + stime of every process in process group ``pgid`` (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after ')': state ppid pgrp ...
            total += int(fields[11]) + int(fields[12])
    return total / tick


def bootstrap_ci(values: list[float], n: int = 10_000, seed: int = 7) -> tuple[float, float]:
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def points_stored(base: str, run_id: str) -> dict[str, list[int]]:
    """The raw steps stored for each per-step key (level 0: one entry per point)."""
    import httpx

    out = {}
    with httpx.Client(base_url=f"{base}/api/v1", timeout=30) as api:
        for key in STEP_KEYS:
            res = api.get(f"/runs/{run_id}/metrics", params={"key": key, "max_points": 20000})
            if res.status_code == 404:
                out[key] = []
                continue
            res.raise_for_status()
            body = res.json()
            assert body["level"] == 0, body["level"]
            steps = []
            for series in body["series"]:
                for step, count in zip(series["step"], series["count"]):
                    steps.extend([step] * count)
            out[key] = sorted(steps)
    return out


def wait_points(base: str, run_id: str, n: int, timeout: float = 120) -> dict[str, list[int]]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = points_stored(base, run_id)
        except Exception:  # noqa: BLE001 - the run may not exist yet
            got = {k: [] for k in STEP_KEYS}
        if all(len(v) >= n for v in got.values()) or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def steps_lost(points: dict[str, list[int]], n: int) -> tuple[int, int]:
    """(steps with a missing point, extra points beyond one per step) over all per-step keys."""
    expected = set(range(1, n + 1))
    missing = set()
    extra = 0
    for steps in points.values():
        missing |= expected - set(steps)
        extra += len(steps) - len(set(steps)) + len(set(steps) - expected)
    return len(missing), extra


class Server:
    """An embedded ``runcast serve`` on a fixed port and data dir, restartable."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.env = {"RUNCAST_DATA_DIR": str(tmp / "server-data")}
        self.port = services.free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: services.Process | None = None
        self.starts = 0

    def token(self) -> str:
        res = subprocess.run([str(services.BIN / "runcast"), "token", "create", "--project", PROJECT],
                             env=services.child_env(self.env), capture_output=True, text=True, check=True)
        return res.stdout.strip().splitlines()[-1]

    def start(self) -> None:
        self.starts += 1
        self.proc, _ = services.start_api(self.env, self.tmp / f"api.{self.starts}.log", port=self.port,
                                          timeout=120)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=20)
            self.proc = None

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, sig)


def summarize(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.1f}" if xs else "-"


# --- part 1: the orchestration ----------------------------------------------------------------------


def overhead(args: argparse.Namespace, server: Server, token: str, loads: list[float]) -> list[dict[str, Any]]:
    pairs = []
    for i in range(args.pairs):
        arms = ["off", "on", "null"] if args.null_arm else ["off", "on"]
        order = arms[i % len(arms):] + arms[:i % len(arms)]  # rotate, and reverse every other block (ABBA)
        if (i // len(arms)) % 2 == 1 if args.null_arm else i % 2 == 1:
            order.reverse()
        pair: dict[str, Any] = {}
        for arm in order:
            loads.append(os.getloadavg()[0])
            cmd = [sys.executable, __file__, "--worker", "--arm", arm, "--steps", str(args.steps),
                   "--warmup", str(args.warmup), "--threads", str(args.threads)]
            if arm == "on":
                cmd += ["--server", server.base, "--token", token]
            cpu0 = group_cpu_seconds(server.proc.pid)
            res = subprocess.run(cmd, check=False, capture_output=True, text=True, env=services.child_env(
                {"RUNCAST_SPOOL_DIR": str(server.tmp / "spool-overhead")}), timeout=1800)
            cpu1 = group_cpu_seconds(server.proc.pid)
            if res.returncode != 0:
                raise SystemExit(f"worker failed:\n{res.stdout}\n{res.stderr}")
            out = json.loads(res.stdout.strip().splitlines()[-1])
            out["server_cpu_s"] = cpu1 - cpu0
            pair[arm] = out
            print(f"  pair {i + 1}/{args.pairs} {arm:3}: median {summarize(out['wall'])} ms/step, "
                  f"load {loads[-1]:.1f}", file=sys.stderr, flush=True)
        pairs.append(pair)
    return pairs


def report_overhead(args: argparse.Namespace, server: Server, pairs: list[dict[str, Any]]) -> list[str]:
    rows = []

    def per_run(p: dict[str, Any]) -> dict[str, float]:
        return {"median": statistics.median(p["wall"]), "mean": statistics.fmean(p["wall"]),
                "cpu": statistics.fmean(p["cpu"]), "compute": statistics.median(p["compute"])}

    labels = {"median": "wall time per step, median of the run", "mean": "wall time per step, mean of the run",
              "cpu": "trainer CPU time per step (all threads), mean",
              "compute": "the trainer's own `step_time_s` (forward+backward+optimizer only), median"}
    comparisons = [("off", "on", "")] + ([("off", "null", " [null/off]"), ("null", "on", " [on/null]")]
                                         if "null" in pairs[0] else [])
    for base_arm, arm, tag in comparisons:
        stats = [(per_run(p[base_arm]), per_run(p[arm])) for p in pairs]
        for what in ("median", "mean", "cpu", "compute"):
            off = [a[what] for a, _ in stats]
            on = [b[what] for _, b in stats]
            ratios = [(b / a - 1) * 100 for a, b in zip(off, on)]
            lo, hi = bootstrap_ci(ratios)
            rows.append(f"| {labels[what]}{tag} | {statistics.median(off) * 1000:.2f} ms "
                        f"| {statistics.median(on) * 1000:.2f} ms "
                        f"| **{statistics.median(ratios):+.2f}%** | [{lo:+.2f}%, {hi:+.2f}%] |")
    log_call = [p["on"]["sdk"]["log_call"] * 1e6 for p in pairs]
    sender_cpu = [p["on"]["sdk"]["sender_cpu"] * 1e6 for p in pairs]
    sdk_share = [(p["on"]["sdk"]["log_call"] + p["on"]["sdk"]["sender_cpu"]) / per_run(p["off"])["median"] * 100
                 for p in pairs]
    sdk_lo, sdk_hi = bootstrap_ci(sdk_share)
    server_cpu = [p["on"]["server_cpu_s"] / p["on"]["steps"] * 1000 for p in pairs]
    idle_cpu = [p["off"]["server_cpu_s"] / p["off"]["steps"] * 1000 for p in pairs]
    # Every "on" run's points must have arrived (a cheap check that logging really happened).
    complete = 0
    for p in pairs:
        missing, extra = steps_lost(wait_points(server.base, p["on"]["run_id"], args.steps, timeout=60), args.steps)
        complete += missing == 0 and extra == 0
    same_loss = all(p["on"]["final_loss"] == p["off"]["final_loss"] for p in pairs)
    lines = [
        ("| measure (per block: arm/baseline - 1; arm on, baseline off unless tagged) | baseline (median over runs) "
        "| arm (median over runs) | overhead, median over blocks | 95% CI |"),
        "|---|---|---|---|---|",
        *rows,
        (f"| SDK work per step, measured directly: `run.log` call {statistics.median(log_call):.1f} us "
        f"+ sender-thread CPU {statistics.median(sender_cpu):.1f} us, as a share of the off run's median step "
        f"| - | {(statistics.median(log_call) + statistics.median(sender_cpu)) / 1000:.3f} ms "
        f"| **{statistics.median(sdk_share):.2f}%** | [{sdk_lo:.2f}%, {sdk_hi:.2f}%] |"),
        "",
        (f"- server (`runcast serve`, embedded) CPU time per step while a logged run ran: "
        f"{statistics.median(server_cpu):.2f} ms (idle during unlogged runs: {statistics.median(idle_cpu):.2f} ms)"),
        (f"- logged runs with all {args.steps} x {len(STEP_KEYS)} points stored: {complete}/{len(pairs)}; "
        f"final loss identical on/off in every pair: {same_loss}"),
    ]
    return lines


# --- part 2: outages -------------------------------------------------------------------------------


def outage(kind: str, args: argparse.Namespace, server: Server, token: str) -> dict[str, Any]:
    import torch
    from runcast.train import train

    torch.set_num_threads(args.threads)
    n = args.outage_steps
    a, b = args.outage_from, n  # b: the first step once --outage-s seconds have passed since step a
    spool = server.tmp / f"spool-{kind}"
    os.environ["RUNCAST_SPOOL_DIR"] = str(spool)
    window: dict[str, float] = {}
    background: list[threading.Thread] = []

    def later(fn: Any) -> None:  # never block the training thread on the server
        t = threading.Thread(target=fn, daemon=True)
        t.start()
        background.append(t)

    def on_step(step: int) -> None:
        nonlocal b
        if step == a:
            window["start"] = time.perf_counter()
            if kind == "down-middle":
                later(server.stop)
            elif kind == "hung-middle":
                server.signal(signal.SIGSTOP)
        elif step > a and "end" not in window and (time.perf_counter() - window["start"] >= args.outage_s or step == n):
            b = step
            window["end"] = time.perf_counter()
            if kind == "down-middle":
                def restart() -> None:
                    background[0].join()
                    server.start()
                    window["up"] = time.perf_counter()  # /healthz answers again

                later(restart)
            elif kind == "hung-middle":
                server.signal(signal.SIGCONT)

    if kind == "down-whole":
        server.stop()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = bench_config(n, tmp, server.base, token, name=f"outage-{kind}")
        run = TimedRun(open_trainer_run(cfg), on_step)
        summary = train(cfg, run=run, log=lambda *_: None)  # finish() included: it waits for the replay
        t_end = time.perf_counter()
    for t in background:
        t.join()
    synced = None
    if kind == "down-whole":
        server.start()
        res = subprocess.run([str(services.BIN / "runcast"), "sync", str(spool), "--token", token], check=False,
                             env=services.child_env({}), capture_output=True, text=True, timeout=300)
        synced = (res.stdout + res.stderr).strip().splitlines()[-1]
    points = wait_points(server.base, run.id, n)
    missing, extra = steps_lost(points, n)
    wall = [y - x for x, y in zip(run.wall, run.wall[1:])]
    # interval i ends at stamp i+1 (step run.steps[i+1])
    inside, outside = [], []
    for i, dt in enumerate(wall):
        stamp = run.wall[i + 1]
        if kind == "down-whole" or window["start"] <= stamp <= window["end"]:
            inside.append(dt)
        elif i >= args.warmup:
            outside.append(dt)
    stats = run.inner.stats
    return {
        "kind": kind, "steps": summary["step"], "expected": n, "missing": missing, "extra": extra,
        "lost": (n - summary["step"]) + missing, "inside": inside, "outside": outside,
        "window_steps": (a, b) if kind != "down-whole" else (1, n), "stats": stats,
        "window_s": (run.wall[-1] - run.wall[0]) if kind == "down-whole"
        else window.get("up", window["end"]) - window["start"],
        "leftover_spools": sorted(p.name for p in spool.glob("*") if p.is_dir()) if spool.exists() else [],
        "synced": synced, "finish_s": t_end - run.wall[-1],
    }


def report_outages(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| scenario | outage: steps (seconds) | steps run | step time median outside / inside the outage | points stored (7 keys) | steps lost | SDK: sent / spooled / replayed / dropped | finish() |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = r["stats"]
        stored = f"{r['expected']} x 7, {r['extra']} extra" if not r["missing"] else f"{r['missing']} steps missing"
        lines.append(
            f"| {r['kind']} | {r['window_steps'][0]}-{r['window_steps'][1]} ({r['window_s']:.0f} s) | {r['steps']}/{r['expected']} "
            f"| {summarize(r['outside'])} / {summarize(r['inside'])} ms | {stored} | **{r['lost']}** "
            f"| {s.sent} / {s.spooled} / {s.replayed} / {s.dropped} | {r['finish_s']:.1f} s |"
        )
    for r in results:
        if r["synced"]:
            lines.append(f"\n- {r['kind']}: after the server came back, `runcast sync`: {r['synced']}")
        if r["leftover_spools"]:
            lines.append(f"- {r['kind']}: spools left behind: {r['leftover_spools']}")
    return lines


# --- main --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=12, help="off/on pairs of runs (ABBA order)")
    parser.add_argument("--steps", type=int, default=200, help="training steps per overhead run")
    parser.add_argument("--warmup", type=int, default=5, help="first step intervals of each run not counted")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (both arms)")
    parser.add_argument("--outage-steps", type=int, default=800, help="training steps per outage run")
    parser.add_argument("--outage-from", type=int, default=20, help="the step at which the middle outages begin")
    parser.add_argument("--outage-s", type=float, default=15.0,
                        help="how long the middle outages last (longer than the SDK's 10 s send timeout)")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-outage", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--null-arm", action="store_true",
                        help="add a diagnostic arm: the SDK logging to a transport that discards batches (no server)")
    parser.add_argument("--arm", choices=("off", "on", "null"), help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    import torch

    loads: list[float] = []
    out = [
        (f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"torch {torch.__version__} (CPU, {args.threads} intra-op thread(s)); server: embedded `runcast serve` "
        f"(SQLite) on 127.0.0.1, same machine"),
        f"command: {' '.join([Path(sys.executable).name, 'bench/trainer_overhead.py', *sys.argv[1:]])}",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp))
        token = server.token()
        server.start()
        try:
            if not args.skip_overhead:
                print(f"overhead: {args.pairs} pairs x {args.steps} steps", file=sys.stderr, flush=True)
                pairs = overhead(args, server, token, loads)
                out += [(f"### Overhead of logging every step ({args.pairs} interleaved blocks of "
                        f"{'off/on/null' if args.null_arm else 'off/on'} x {args.steps} steps, "
                        f"first {args.warmup} intervals dropped)"), "", *report_overhead(args, server, pairs), ""]
            if not args.skip_outage:
                results = []
                for kind in ("down-whole", "down-middle", "hung-middle"):
                    loads.append(os.getloadavg()[0])
                    print(f"outage: {kind}", file=sys.stderr, flush=True)
                    results.append(outage(kind, args, server, token))
                out += [f"### Server outages ({args.outage_steps} steps each)", "", *report_outages(results), ""]
        finally:
            server.stop()
    loads.append(os.getloadavg()[0])
    out.append(f"load average (1 min) seen at run starts: min {min(loads):.1f}, median {statistics.median(loads):.1f}, "
               f"max {max(loads):.1f}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
