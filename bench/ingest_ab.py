"""End-to-end ingest throughput of two checkouts, measured in alternation under the same load.

    .venv/bin/python bench/ingest_ab.py --a /path/to/main --b . --rounds 4 --repeat 2

Each round runs ``bench/backbone.py --only ingest`` of checkout A, then of checkout B
(each with its own throwaway PostgreSQL with durable settings, Redis, one API and one
worker ``--pool solo``; the SDK over HTTP), so a change in the machine's load hits both
alike. Each checkout runs with its own code (``PYTHONPATH`` = its trainer, backend and
tests). Prints every repeat's points/s, the load average around it, the medians and
B's median as a fraction of A's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def one(checkout: Path, steps: int, repeat: int) -> tuple[list[float], str, dict[str, float]]:
    """One backbone run of ``checkout``: its repeats' points/s, the load seen, CPU µs per point."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNCAST_")}
    env["PYTHONPATH"] = os.pathsep.join(str(checkout / p) for p in ("trainer", "backend", "tests"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        subprocess.run(
            [sys.executable, str(checkout / "bench" / "backbone.py"), "--only", "ingest", "--transports", "http",
             "--steps", str(steps), "--repeat", str(repeat), "--json", str(out)],
            env=env, cwd=checkout, check=True, stdout=subprocess.DEVNULL,
        )
        [row] = json.loads(out.read_text())["ingest"]
    return [float(x) for x in row["runs"]], row["load"], row["cpu_us_per_point"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", type=Path, required=True, help="the reference checkout (e.g. main)")
    parser.add_argument("--b", type=Path, required=True, help="the checkout to compare")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2, help="repeats per backbone run")
    parser.add_argument("--steps", type=int, default=100_000, help="steps x 8 scalars per repeat")
    args = parser.parse_args()
    results: dict[str, list[float]] = {"a": [], "b": []}
    cpus: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    print(f"A = {args.a.resolve()}, B = {args.b.resolve()}; load at start {os.getloadavg()}", flush=True)
    for r in range(args.rounds):
        for name in ("a", "b"):
            rates, load, cpu = one(getattr(args, name).resolve(), args.steps, args.repeat)
            results[name].extend(rates)
            cpus[name].append(cpu)
            per = ", ".join(f"{k.split()[0]} {v:.2f}" for k, v in cpu.items())
            print(f"round {r + 1} {name.upper()}: {[round(x) for x in rates]} points/s (load {load}); "
                  f"CPU us/point {per}", flush=True)
    med_a, med_b = statistics.median(results["a"]), statistics.median(results["b"])
    print(f"A median {med_a:,.0f} points/s over {len(results['a'])} repeats: {[round(x) for x in results['a']]}")
    print(f"B median {med_b:,.0f} points/s over {len(results['b'])} repeats: {[round(x) for x in results['b']]}")
    for name in ("a", "b"):
        cpu = {k: statistics.median(c[k] for c in cpus[name]) for k in cpus[name][0]}
        print(f"{name.upper()} CPU us/point (median of runs): "
              + ", ".join(f"{k.split()[0]} {v:.2f}" for k, v in cpu.items()) + f", total {sum(cpu.values()):.2f}")
    print(f"B / A = {med_b / med_a:.3f}; load at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
