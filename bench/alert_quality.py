"""Quality of the alert detectors: precision, recall and detection delay per detector.

    .venv/bin/python bench/alert_quality.py [--curves 40] [--seed 1] [--json out.json]

Synthetic: realistic pretraining baselines (warm-up, power-law decay, cosine lr decay
that lowers the loss, heavy-tailed noise, benign grad-norm bumps and checkpoint-step
throughput dips) with anomalies of each kind injected at random steps and sizes, fixed
seeds. Every detector runs with its default parameters through the same
``SegmentRunner`` the ingest path uses. An injected anomaly is found when an alert of
its kind opens inside it (or within the detector's documented lag after it); an alert
of that kind that matches no injected anomaly is a false alert. Clean curves (no
injection) give false alerts per 10,000 steps for every detector.

Real: every CSV in data/real/ (see its README), or in ``--data DIR``, is fed segment by
segment (a resumed segment inherits the previous one's detector state, as on ingest);
every documented loss spike / divergence must overlap an alert, and alerts elsewhere are
false alerts, counted per detector per 10,000 logged rows and per 10,000 steps covered.
``--real-only`` skips the synthetic part (seconds instead of minutes).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import multiprocessing
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "backend"))
sys.path.insert(0, str(ROOT / "trainer"))

from runcast_server.detectors.config import DEFAULTS, effective
from runcast_server.detectors.core import SegmentRunner, inherit
from runcast_server.detectors.runlevel import restart, restart_quiet, stalled

STEPS = 30_000


# --- synthetic baselines ------------------------------------------------------------------------


def baseline(rng: random.Random, steps: int = STEPS) -> dict[str, list[float]]:
    """loss, grad_norm, tokens_per_s per step and val/loss every 250 steps (NaN elsewhere)."""
    floor = rng.uniform(1.6, 2.6)
    amp = rng.uniform(6.0, 10.0)
    alpha = rng.uniform(0.35, 0.6)
    warm = rng.randint(200, 2000)
    noise = rng.uniform(0.004, 0.02)
    g0 = rng.uniform(0.2, 1.5)
    t0 = rng.uniform(5e4, 4e5)
    loss, grad, tput, val = [], [], [], []
    jitter_left, jitter_factor, quiet_left = 0, 1.0, 0
    for t in range(steps):
        lr = min(1.0, (t + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t / steps)))
        smooth = floor + amp * (t + 20) ** -alpha - 0.05 * floor * (1 - lr) * (t > warm)
        e = rng.gauss(0, 1) / math.sqrt(rng.gammavariate(4.0, 1 / 4.0))  # Student-t, 8 dof
        loss.append(smooth * (1 + noise * e))
        g = g0 * (1 + 4 * math.exp(-t / 300)) * math.exp(rng.gauss(0, 0.15))
        if rng.random() < 0.005:
            g *= rng.uniform(1.5, 3.0)  # benign bumps
        grad.append(g)
        tp = t0 * (1 + rng.gauss(0, 0.02))
        if t % 1000 == 999:
            tp *= 0.5  # the step that saves a checkpoint is slow
        if jitter_left > 0:
            tp *= jitter_factor
            jitter_left -= 1
        elif quiet_left > 0:
            quiet_left -= 1
        elif rng.random() < 0.004:
            # a busy neighbour: a burst of up to 60 slow steps, then at least as many normal ones
            # (busier than that, for 100 steps and more, is a sustained drop, not jitter)
            jitter_left, jitter_factor = rng.randint(1, 60), rng.uniform(0.15, 0.9)
            quiet_left = jitter_left
        tput.append(tp)
        val.append(smooth * 1.03 * (1 + rng.gauss(0, 0.003)) if t % 250 == 0 and t > 0 else math.nan)
    return {"loss": loss, "grad_norm": grad, "tokens_per_s": tput, "val/loss": val}


def places(rng: random.Random, n: int, lo: int, hi: int, gap: int) -> list[int]:
    out: list[int] = []
    while len(out) < n:
        s = rng.randint(lo, hi)
        if all(abs(s - o) > gap for o in out):
            out.append(s)
    return sorted(out)


def inject(kind: str, c: dict[str, list[float]], rng: random.Random) -> list[dict[str, Any]]:
    """Inject anomalies of ``kind``; returns [{start, end, size}]."""
    n = len(c["loss"])
    out = []
    if kind == "spike":
        for s in places(rng, 3, 1500, n - 1500, 3000):
            length, height = rng.randint(1, 100), rng.uniform(0.3, 3.0)
            decay = rng.choice([0.0, 0.05, 0.2])
            for t in range(s, s + length):
                c["loss"][t] *= 1 + height * math.exp(-decay * (t - s))
            out.append({"start": s, "end": s + length - 1, "size": height})
    elif kind == "nonfinite":
        for s in places(rng, 3, 1500, n - 1500, 3000):
            key = rng.choice(["loss", "grad_norm"])
            length = rng.randint(1, 10)
            bad = rng.choice([math.nan, math.inf])
            for t in range(s, s + length):
                c[key][t] = bad
            out.append({"start": s, "end": s + length - 1, "size": length})
    elif kind == "grad_norm":
        for s in places(rng, 3, 1500, n - 1500, 3000):
            length, factor = rng.randint(1, 20), 10 ** rng.uniform(1, 3)
            for t in range(s, s + length):
                c["grad_norm"][t] *= factor
            out.append({"start": s, "end": s + length - 1, "size": factor})
    elif kind == "plateau":
        s = rng.randint(6000, n - 20000)
        length = rng.randint(15000, n - s - 1)  # a plateau is at least 1.5 windows long
        level = c["loss"][s - 50 : s]
        ref = sorted(level)[25]
        for t in range(s, s + length):
            c["loss"][t] = ref * (1 + rng.gauss(0, 0.01))
        out.append({"start": s, "end": s + length - 1, "size": length})
    elif kind == "divergence":
        s = rng.randint(5000, n - 8000)
        if rng.random() < 0.5:  # train loss trends up
            length, rise = rng.randint(500, 3000), rng.uniform(0.1, 0.6)
            for t in range(s, n):
                c["loss"][t] *= 1 + rise * min(1.0, (t - s) / length)
            out.append({"start": s, "end": n - 1, "size": rise, "mode": "train_trend"})
        else:  # overfitting: validation rises while training keeps falling
            rate = rng.uniform(0.01, 0.05)  # relative rise per 1000 steps
            for t in range(s, n):
                if not math.isnan(c["val/loss"][t]):
                    c["val/loss"][t] *= 1 + rate * (t - s) / 1000
            out.append({"start": s, "end": n - 1, "size": rate, "mode": "overfit"})
    elif kind == "throughput":
        for s in places(rng, 2, 1500, n - 3000, 5000):
            length, drop = rng.randint(200, 2000), rng.uniform(0.35, 0.8)  # sustained: twice `confirm` blocks or more
            for t in range(s, min(n, s + length)):
                c["tokens_per_s"][t] *= 1 - drop
            out.append({"start": s, "end": min(n, s + length) - 1, "size": drop})
    return out


LAG = {"spike": 0, "nonfinite": 0, "grad_norm": 0, "plateau": 12000, "divergence": 4000, "throughput": 10}


def run_curve(c: dict[str, list[float]], cfg: dict[str, Any]) -> list[tuple[str, str, int]]:
    runner = SegmentRunner(cfg, {})
    out = []
    n = len(c["loss"])
    for t in range(n):
        pts = [(t, k, v[t]) for k, v in c.items() if not (k == "val/loss" and math.isnan(v[t]))]
        for sig in runner.feed(pts):
            out.append((sig.kind, sig.phase, sig.step))
    return out


def score(injected: list[dict[str, Any]], opens: list[int], lag: int) -> tuple[int, int, list[int]]:
    """(found, false alerts, delays)."""
    found, delays, used = 0, [], set()
    for a in injected:
        hits = [s for s in opens if a["start"] <= s <= a["end"] + lag]
        if hits:
            found += 1
            delays.append(hits[0] - a["start"])
            used.update(hits)
    return found, len([s for s in opens if s not in used]), delays


def _one(job: tuple[str, int, int]) -> tuple[list[dict[str, Any]], list[int]]:
    kind, i, seed = job
    rng = random.Random(f"{seed}-{kind}-{i}")
    c = baseline(rng)
    inj = inject(kind, c, rng)
    return inj, [s for k, ph, s in run_curve(c, effective(None)) if k == kind and ph == "open"]


def _clean(job: tuple[int, int]) -> list[str]:
    i, seed = job
    c = baseline(random.Random(f"{seed}-clean-{i}"))
    return [k for k, ph, _ in run_curve(c, effective(None)) if ph == "open"]


def synthetic(curves: int, seed: int, procs: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    kinds = ("spike", "nonfinite", "grad_norm", "plateau", "divergence", "throughput")
    with multiprocessing.Pool(procs) as pool:
        done = pool.map(_one, [(k, i, seed) for k in kinds for i in range(curves)])
        clean = pool.map(_clean, [(i, seed) for i in range(curves)])
    for n, kind in enumerate(kinds):
        injected_n = found_n = false_n = 0
        delays: list[int] = []
        misses = []
        for i, (inj, opens) in enumerate(done[n * curves : (n + 1) * curves]):
            f, fa, d = score(inj, opens, LAG[kind])
            injected_n += len(inj)
            found_n += f
            false_n += fa
            delays += d
            for a in inj:
                if not any(a["start"] <= s <= a["end"] + LAG[kind] for s in opens):
                    misses.append({"curve": i, **a})
        alerts = found_n + false_n
        results[kind] = {
            "injected": injected_n,
            "found": found_n,
            "false_alerts": false_n,
            "recall": found_n / injected_n if injected_n else None,
            "precision": found_n / alerts if alerts else None,
            "delay_median": sorted(delays)[len(delays) // 2] if delays else None,
            "delay_p90": sorted(delays)[int(len(delays) * 0.9)] if delays else None,
            "misses": misses[:10],
        }
    fa: dict[str, int] = {}
    for kinds_opened in clean:
        for k in kinds_opened:
            fa[k] = fa.get(k, 0) + 1
    results["clean_false_per_10k"] = {k: fa.get(k, 0) / (curves * STEPS) * 1e4 for k in
                                      ("spike", "nonfinite", "grad_norm", "plateau", "divergence", "throughput")}
    results["restart_loop"] = restarts(curves, seed)
    results["stall"] = stalls(curves, seed)
    return results


def _tally(windows: list[tuple[float, float]], opens: list[float], slack: float, counts: dict[str, Any]) -> None:
    """Match alert opening times to injected windows ``[a, b + slack]`` (a hit at ``a`` counts only
    when ``slack`` is 0, as in the restart loops); add found, false and delays to ``counts``."""
    used: set[float] = set()
    for a, b in windows:
        hits = [o for o in opens if (a <= o if slack == 0 else a < o) and o <= b + slack]
        if hits:
            counts["found"] += 1
            counts["delays"].append(hits[0] - a)
            used.update(hits)
    counts["injected"] += len(windows)
    counts["false"] += len([o for o in opens if o not in used])


def _summary(counts: dict[str, Any]) -> dict[str, Any]:
    inj, found, false, delays = counts["injected"], counts["found"], counts["false"], counts["delays"]
    return {"injected": inj, "found": found, "false_alerts": false, "recall": found / inj if inj else None,
            "precision": found / (found + false) if found + false else None,
            "delay_median_s": sorted(delays)[len(delays) // 2] if delays else None}


def restarts(curves: int, seed: int) -> dict[str, Any]:
    """Resumes spaced hours apart, with injected loops of 3-6 resumes within 2-40 minutes."""
    p = DEFAULTS["restart_loop"]
    counts: dict[str, Any] = {"injected": 0, "found": 0, "false": 0, "delays": []}
    for i in range(curves):
        rng = random.Random(f"{seed}-restart-{i}")
        t, events, loops = 0.0, [], []
        for _ in range(rng.randint(1, 3)):
            t += rng.expovariate(1 / (8 * 3600))
            events.append(t)
            if rng.random() < 0.7:
                k, span = rng.randint(3, 6), rng.uniform(120, 2400)
                loop = sorted(t + rng.uniform(0, span) for _ in range(k - 1))
                events += loop
                loops.append((t, loop[-1]))
                t = loop[-1] + 4 * 3600
        state: dict[str, Any] = {}
        opens = []
        for ts in sorted(events):
            for sig in restart_quiet(state, p, ts - 1e-6) + restart(state, p, ts, None):
                if sig.phase == "open":
                    opens.append(ts)
        _tally(loops, opens, 0.0, counts)
    return _summary(counts)


def stalls(curves: int, seed: int) -> dict[str, Any]:
    """Heartbeats every ~30 s with checkpoint pauses up to 5 minutes; injected hangs of
    15 minutes to 3 hours; the periodic check runs every 30 s."""
    p = DEFAULTS["stall"]
    counts: dict[str, Any] = {"injected": 0, "found": 0, "false": 0, "delays": []}
    for i in range(curves):
        rng = random.Random(f"{seed}-stall-{i}")
        t, beats, hangs = 0.0, [], []
        for _ in range(2000):
            gap = rng.uniform(25, 35)
            if rng.random() < 0.01:
                gap = rng.uniform(60, 300)  # checkpoint save
            if rng.random() < 0.002:
                gap = rng.uniform(900, 3 * 3600)
                hangs.append((t, t + gap))
            t += gap
            beats.append(t)
        opens, last, is_open, clock = [], 0.0, False, 0.0
        bi = 0
        while clock < t:
            clock += 30
            while bi < len(beats) and beats[bi] <= clock:
                last, is_open = beats[bi], False
                bi += 1
            if not is_open and stalled(last, clock, p):
                is_open = True
                opens.append(clock)
        _tally(hangs, opens, 30.0, counts)
    return _summary(counts)


# --- real logs --------------------------------------------------------------------------------

# CSV column -> metric key fed to the detectors. Throughput: the first of these a log has;
# an iteration time becomes a rate (iterations per second).
REAL_COLUMNS = (("loss", "loss"), ("val_loss", "val/loss"), ("grad_norm", "grad_norm"))
THROUGHPUT_COLUMNS = (("tokens_per_s", "tokens_per_s", False), ("samples_per_sec", "throughput", False),
                      ("iter_time_ms", "throughput", True), ("iter_time_s", "throughput", True))
LOSS_KINDS = ("spike", "divergence", "nonfinite", "grad_norm", "plateau")
POINT_KINDS = ("spike", "nonfinite", "grad_norm", "plateau", "divergence", "throughput")


def _points(r: dict[str, str], step: int) -> list[tuple[int, str, float]]:
    pts = []
    for col, key in REAL_COLUMNS:
        if r.get(col) not in (None, ""):
            v = float(r[col])
            if col == "grad_norm" and v == 0.0:
                continue  # "grad norm: 0.000" is a logger's placeholder, not a value
            pts.append((step, key, v))
    for col, key, inverse in THROUGHPUT_COLUMNS:
        if r.get(col) not in (None, ""):
            v = float(r[col])
            if inverse:
                v = 1.0 / v if v > 0 else math.inf
            pts.append((step, key, v))
            break
    return pts


def real_log(path: Path) -> dict[str, Any]:
    """Feed one CSV log (columns ``step``, ``loss`` and optional others; ``run``/``segment``
    group it) to the detectors; score against ``<name>.events.json`` when there is one.

    A segment continues the history of the run's previous one, as a resume does on ingest,
    except in logs whose events file says ``"segments": "separate"`` (excerpts of separate
    launches). Every alert that opens outside a known anomaly (a documented loss spike or
    divergence, or an observation) counts as a false alert.
    """
    name = path.name.removesuffix(".csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    events_path = path.with_name(f"{name}.events.json")
    doc = json.loads(events_path.read_text()) if events_path.exists() else {"events": []}
    separate = doc.get("segments") == "separate"
    cfg = effective(None)
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault((r.get("run") or name, r.get("segment") or "main"), []).append(r)
    alerts: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    prev_state: dict[str, dict[Any, Any]] = {}
    spans_of_steps: dict[tuple[str, str, str], list[int]] = {}  # (run, segment, excerpt) -> [first, last]
    for (run, seg), seg_rows in groups.items():  # dicts keep the log's order
        base = None if separate else prev_state.get(run)
        states = {k: inherit(v) for k, v in base.items()} if base else {}
        runner = SegmentRunner(cfg, states)
        seg_steps = [int(r["step"]) for r in seg_rows]
        for r, step in zip(seg_rows, seg_steps):
            span = spans_of_steps.setdefault((run, seg, r.get("excerpt") or ""), [step, step])
            span[0], span[1] = min(span[0], step), max(span[1], step)
        for r, step in zip(seg_rows, seg_steps):
            for sig in runner.feed(_points(r, step)):
                alerts.append({"run": run, "segment": seg, "kind": sig.kind, "phase": sig.phase, "step": sig.step,
                               "key": sig.key})
        prev_state[run] = states
        # a spike candidate the log ends on: the detector waits for the next point, which the log lacks
        pending += [{"run": run, "segment": seg, "kind": name_, "key": key, "start": st["pending"]["step"], "end": None}
                    for (key, name_), st in states.items() if st.get("pending")]
    steps_covered = sum(hi - lo + 1 for lo, hi in spans_of_steps.values())
    spans = _open_spans(alerts)
    documented = []
    for e in doc["events"]:
        if e["type"] not in ("loss_spike", "divergence") or e.get("step") is None or not e.get("in_csv"):
            continue
        lo, hi = e["step"], e.get("step_end") or e["step"]
        run = e.get("run", name)
        hits = [s for s in spans if _within(s, run, e["segment"], lo, hi)]
        # the log ends on the spike's first point: found only where the source says the loss stayed high
        held = [s for s in pending if _within(s, run, e["segment"], lo, hi)] if e.get("stays_high") else []
        documented.append({"run": run, "segment": e["segment"], "type": e["type"], "step": lo, "step_end": hi,
                           "found": bool(hits or held), "by": sorted({h["kind"] for h in hits}
                                                                     | {h["kind"] + " (pending)" for h in held}),
                           "delay": (min(h["start"] for h in hits + held) - lo) if hits or held else None})
    # observations (visible in the numbers, not described by the source) count as known anomalies
    observed = []
    for o in doc.get("observations", []):
        lo, hi = o["step"], o.get("step_end") or o["step"]
        hits = [s for s in spans if s["kind"] in ("spike", "divergence", "nonfinite")
                and s["start"] <= hi and (s["end"] is None or s["end"] >= lo)]
        observed.append({"type": o["type"], "step": lo, "step_end": hi, "found": bool(hits),
                         "by": sorted({(h["segment"], h["kind"], h["start"]) for h in hits})})
    known = documented + [{"run": None, **o} for o in observed]
    false = []
    for s in spans:
        # an alert of a loss detector opening inside a known loss anomaly describes that anomaly
        inside = any((d["run"] is None or (s["run"] == d["run"] and s["segment"] == d["segment"]))
                     and s["kind"] in LOSS_KINDS and d["step"] <= s["start"] <= d["step_end"]
                     for d in known) or any(
            (d["run"] is None or (s["run"] == d["run"] and s["segment"] == d["segment"]))
            and s["kind"] in ("spike", "divergence", "nonfinite", "grad_norm")
            and s["start"] <= d["step_end"] and (s["end"] is None or s["end"] >= d["step"])
            for d in known)
        if not inside:
            false.append(s)
    return {
        "rows": len(rows),
        "steps": steps_covered,
        "documented": documented,
        "observations": observed,
        "alerts_by_kind": _count(spans),
        "false_alerts": len(false),
        "false_by_kind": _count(false),
        "false_examples": false[:12],
        "pending_at_end": pending,
    }


def _within(s: dict[str, Any], run: str, segment: str, lo: int, hi: int) -> bool:
    """Whether alert span ``s`` is a loss alert of (run, segment) overlapping steps ``lo``..``hi``."""
    return (s["run"] == run and s["segment"] == segment and s["kind"] in ("spike", "divergence", "nonfinite")
            and s["start"] <= hi and (s["end"] is None or s["end"] >= lo))


def real(data: Path) -> dict[str, Any]:
    """Every ``*.csv`` log in ``data``, by name."""
    return {p.name.removesuffix(".csv"): real_log(p) for p in sorted(data.glob("*.csv"))}


def _open_spans(alerts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    spans, opened = [], {}
    for a in alerts:
        k = (a["run"], a["segment"], a["kind"], a["key"])
        if a["phase"] == "open":
            opened[k] = {"run": a["run"], "segment": a["segment"], "kind": a["kind"], "key": a["key"], "start": a["step"],
                         "end": None}
            spans.append(opened[k])
        elif k in opened:
            opened.pop(k)["end"] = a["step"]
    return spans


def _count(spans: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in spans:
        out[s["kind"]] = out.get(s["kind"], 0) + 1
    return out


def print_real(rl: dict[str, Any], data: Path) -> None:
    rows = sum(r["rows"] for r in rl.values())
    print(f"\nReal logs ({data}; {len(rl)} logs, {rows} rows)")
    print("| log | rows | steps covered | documented spikes / divergences found | false alerts | "
          "per 10k rows | per 10k steps |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, r in rl.items():
        found = sum(d["found"] for d in r["documented"])
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["false_by_kind"].items()))
        print(f"| {name} | {r['rows']} | {r['steps']} | {found} / {len(r['documented'])} | "
              f"{r['false_alerts']}{' (' + kinds + ')' if kinds else ''} | {r['false_alerts'] / r['rows'] * 1e4:.2f} | "
              f"{r['false_alerts'] / r['steps'] * 1e4:.3f} |")
    steps = sum(r["steps"] for r in rl.values())
    print("\nFalse alerts per detector, all logs together (per 10k rows / per 10k steps covered):")
    for kind in POINT_KINDS:
        n = sum(r["false_by_kind"].get(kind, 0) for r in rl.values())
        print(f"- {kind}: {n} ({n / rows * 1e4:.3f} / {n / steps * 1e4:.4f})")
    n = sum(r["false_alerts"] for r in rl.values())
    print(f"- all: {n} ({n / rows * 1e4:.3f} / {n / steps * 1e4:.4f})")
    for name, r in rl.items():
        for d in r["documented"]:
            how = f"found by {','.join(d['by'])} (delay {d['delay']})" if d["found"] else "MISSED"
            print(f"    {name}: {d['run']} {d['segment']} {d['type']} {d['step']}-{d['step_end']}: {how}")
        for o in r["observations"]:
            print(f"    {name}: observation {o['type']} {o['step']}-{o['step_end']}: "
                  f"{'found by ' + str(o['by']) if o['found'] else 'MISSED'}")
        for o in r["pending_at_end"]:
            print(f"    {name}: the log ends on an unconfirmed {o['kind']} candidate {o['run']} {o['segment']} at {o['start']}")
        for o in r["false_examples"]:
            print(f"    {name}: false alert {o['run']} {o['segment']} {o['kind']} {o['key']} steps {o['start']}-{o['end']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--curves", type=int, default=20, help="synthetic curves per detector")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--data", type=Path, default=ROOT / "data" / "real", help="a folder of CSV logs")
    ap.add_argument("--real-only", action="store_true", help="only the real logs (seconds, not minutes)")
    ap.add_argument("--json", type=Path, default=None, help="also write the full results here")
    args = ap.parse_args()
    syn: dict[str, Any] = {}
    if not args.real_only:
        syn = synthetic(args.curves, args.seed, args.procs)
        print(f"Synthetic ({args.curves} curves of {STEPS} steps per detector, seed {args.seed}, default parameters)")
        print("| detector | injected | found | false alerts | recall | precision | delay median | delay p90 |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for kind in POINT_KINDS:
            r = syn[kind]
            print(f"| {kind} | {r['injected']} | {r['found']} | {r['false_alerts']} | {r['recall']:.3f} | "
                  f"{r['precision']:.3f} | {r['delay_median']} steps | {r['delay_p90']} steps |")
        for kind in ("restart_loop", "stall"):
            r = syn[kind]
            print(f"| {kind} | {r['injected']} | {r['found']} | {r['false_alerts']} | {r['recall']:.3f} | "
                  f"{r['precision']:.3f} | {r['delay_median_s']:.0f} s | |")
        print("\nFalse alerts per 10,000 steps on clean synthetic curves:",
              ", ".join(f"{k} {v:.3f}" for k, v in syn["clean_false_per_10k"].items()))
    rl = real(args.data)
    print_real(rl, args.data)
    if args.json:
        args.json.write_text(json.dumps({"synthetic": syn, "real": rl}, indent=1, default=str))


if __name__ == "__main__":
    main()
