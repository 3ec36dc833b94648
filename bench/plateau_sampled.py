"""The plateau detector on sampled logs: the synthetic curves of ``alert_quality.py``, fed
only at N random steps each, as a W&B export that keeps N points of a run does.

    .venv/bin/python bench/plateau_sampled.py [--curves 20] [--seed 1] [--points 500 1000 2000 5000] [--z 3]

For each N: plateaus found among the injected ones (one per curve, at least 15,000 steps
long; found = an alert opening inside it or up to 12,000 steps after), other plateau
alerts on those curves, and plateau alerts on the clean curves (none injected). The
sampled steps are drawn with a fixed seed per curve. ``--z`` overrides the plateau's ``z``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from alert_quality import LAG, baseline, inject, score  # noqa: E402
from runcast_server.detectors.config import DETECTORS, effective  # noqa: E402
from runcast_server.detectors.core import SegmentRunner  # noqa: E402


def opens(loss: list[float], steps: list[int], cfg: dict[str, Any]) -> list[int]:
    """The steps where a plateau alert opens when only ``steps`` of ``loss`` are logged."""
    runner = SegmentRunner(cfg, {})
    return [s.step for t in steps for s in runner.feed([(t, "loss", loss[t])]) if s.phase == "open" and s.step is not None]


def measure(curves: int, seed: int, points: int, cfg: dict[str, Any]) -> dict[str, int]:
    found = false = clean_false = 0
    delays: list[int] = []
    for i in range(curves):
        rng = random.Random(f"{seed}-plateau-{i}")
        c = baseline(rng)
        injected = inject("plateau", c, rng)
        steps = sorted(random.Random(f"{seed}-sample-{i}").sample(range(len(c["loss"])), points))
        f, fa, d = score(injected, opens(c["loss"], steps, cfg), LAG["plateau"])
        found, false, delays = found + f, false + fa, delays + d
        clean = baseline(random.Random(f"{seed}-clean-{i}"))["loss"]
        clean_false += len(opens(clean, steps, cfg))
    delays.sort()
    return {"found": found, "false": false, "clean_false": clean_false,
            "delay_median": delays[len(delays) // 2] if delays else -1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--curves", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--points", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    ap.add_argument("--z", type=float, default=None, help="the plateau's z (default: the detector's)")
    args = ap.parse_args()
    plateau = {} if args.z is None else {"z": args.z}
    cfg = effective({**{d: d == "plateau" for d in DETECTORS}, "plateau": plateau})
    print(f"Plateau on sampled synthetic curves ({args.curves} with a plateau, {args.curves} clean, seed {args.seed}, "
          f"z {cfg['plateau']['z']})")
    print("| points logged of 30,000 steps | plateaus found | other plateau alerts | alerts on clean curves | delay median |")
    print("| --- | --- | --- | --- | --- |")
    for n in args.points:
        r = measure(args.curves, args.seed, n, cfg)
        print(f"| {n} | {r['found']} / {args.curves} | {r['false']} | {r['clean_false']} | {r['delay_median']} steps |")


if __name__ == "__main__":
    main()
