"""The system sampler's cost per sample (runcast.system), on the sampling thread.

    .venv/bin/python bench/system_sampler.py [--samples 2000]

Times ``Collector.sample()`` (psutil; NVML when a GPU and its driver are there) as the
first local rank (host-wide figures too) and as another rank (process figures only), and
``SystemSampler.sample_once()`` (the sample plus its wire event); prints a table with the
median, p95 and max microseconds and the CPU time per sample, and the share of one core
that sampling every 10 s (the default) takes. The training thread does none of this work.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from runcast import system


class Discard:
    url = "http://discard"

    def send(self, body: bytes, events: list[dict[str, Any]], timeout: float) -> None:
        pass

    def close(self) -> None:
        pass


def measure(fn: Callable[[], object], samples: int) -> tuple[list[float], float]:
    fn()  # warm
    wall = []
    cpu0 = time.thread_time()
    for _ in range(samples):
        t = time.perf_counter()
        fn()
        wall.append((time.perf_counter() - t) * 1e6)
    return wall, (time.thread_time() - cpu0) * 1e6 / samples


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=2000)
    args = ap.parse_args()
    first = system.make_collector(0)
    other = system.make_collector(1)
    if first is None or other is None:
        raise SystemExit("psutil is not installed: pip install 'runcast[system]'")
    sampler = system.SystemSampler(
        run="bench-run-0000", segment="bench-seg-0000", rank=0, prefix="system/node0/rank0", interval=10.0,
        collector=first, transport=Discard(),
    )  # fmt: skip
    rows = [
        ("Collector.sample, first local rank", first.sample, len(first.sample())),
        ("Collector.sample, other rank", other.sample, len(other.sample())),
        ("SystemSampler.sample_once (+ event)", lambda: (sampler.sample_once(), sampler._pending.clear()), len(first.sample())),
    ]
    print(f"{args.samples} samples each; GPUs read: {len(first._gpus)}; load average {os.getloadavg()}")
    print(f"| {'what':<38} | figures | median µs | p95 µs | max µs | CPU µs | CPU at 10 s |")
    print(f"|{'-' * 40}|---------|-----------|--------|--------|--------|-------------|")
    for name, fn, figures in rows:
        wall, cpu = measure(fn, args.samples)
        wall.sort()
        p95 = wall[int(0.95 * (len(wall) - 1))]
        share = cpu / 10e6 * 100
        print(f"| {name:<38} | {figures:>7} | {statistics.median(wall):>9.0f} | {p95:>6.0f} | {wall[-1]:>6.0f} "
              f"| {cpu:>6.0f} | {share:>10.4f}% |")
    first.close()
    other.close()


if __name__ == "__main__":
    main()
