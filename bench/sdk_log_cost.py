"""What one ``run.log()`` of 8 scalars costs the training thread.

    .venv/bin/python bench/sdk_log_cost.py [--calls 50000] [--pace-us 100] [--server URL --token T]
                                           [--mode online|offline|disabled]

Each call is timed alone (``perf_counter_ns``) while the sender thread runs as in a
real job: batching, encoding and delivering (to a transport that discards batches,
or to ``--server``). Prints mean, p50, p99 and max in microseconds per value kind.
A tight loop is the worst case: the sender thread is then busy all the time and
competes for the GIL; ``--pace-us`` spaces the calls out the way training steps do.
``--mode disabled`` measures ``init(mode="disabled")``: what a switched-off run costs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from typing import Any

import runcast


class NullTransport:
    """Accepts every batch at once: measures the SDK, not a network."""

    url = "null://"

    def send(self, body: bytes, events: list[dict[str, Any]], timeout: float) -> None:
        pass

    def close(self) -> None:
        pass


def _value_kinds() -> dict[str, Any]:
    kinds: dict[str, Any] = {"float": lambda i: float(i) * 0.5, "int": lambda i: i}
    try:
        import numpy as np

        kinds["numpy.float32"] = lambda i: np.float32(i)
    except ImportError:
        pass
    try:
        import torch

        cache = [torch.tensor(float(i)) for i in range(64)]
        kinds["torch cpu 0-d"] = lambda i: cache[i % 64]
    except ImportError:
        pass
    return kinds


def measure(
    make_value: Any, calls: int, transport: Any, token: str | None, spool: str, pace_us: float = 0.0,
    mode: str = "online",
) -> list[float]:
    run = runcast.init(
        "bench", "log-cost", transport=transport, token=token, dir=spool, capture_code=False,
        heartbeat_interval=3600, mode=mode,
    )
    keys = [f"train/m{k}" for k in range(8)]
    rows = [{key: make_value(i + k) for k, key in enumerate(keys)} for i in range(256)]
    for step in range(1000):  # warm-up
        run.log(rows[step % 256], step=step)
    clock = time.perf_counter_ns
    samples = []
    for step in range(1000, 1000 + calls):
        values = rows[step % 256]
        start = clock()
        run.log(values, step=step)
        end = clock()
        samples.append((end - start) / 1000)
        if pace_us:
            until = end + pace_us * 1000
            while clock() < until:
                pass
    run.finish()
    stats = run.stats
    if stats.dropped:
        print(f"warning: {stats.dropped} events dropped", file=sys.stderr)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50_000)
    parser.add_argument("--server", help="send to this Runcast server instead of discarding")
    parser.add_argument("--token", default="bench")
    parser.add_argument("--pace-us", type=float, default=0.0,
                        help="busy-wait this long between calls, like a training step would (0: tight loop)")
    parser.add_argument("--mode", choices=("online", "offline", "disabled"), default="online",
                        help="the run's mode (runcast.init(mode=...))")
    args = parser.parse_args()
    transport = args.server or NullTransport()
    pace = f"{args.pace_us:g} us of other work between calls" if args.pace_us else "tight loop"
    print(f"run.log() of 8 scalars, mode {args.mode}, {args.calls} calls each ({pace}), "
          f"python {sys.version.split()[0]}")
    print(f"{'values':<16}{'mean us':>10}{'p50 us':>10}{'p99 us':>10}{'max us':>10}")
    with tempfile.TemporaryDirectory() as spool:
        for label, make_value in _value_kinds().items():
            samples = sorted(measure(make_value, args.calls, transport, args.token, spool, args.pace_us,
                                     args.mode))
            p50 = samples[len(samples) // 2]
            p99 = samples[int(len(samples) * 0.99)]
            print(f"{label:<16}{statistics.fmean(samples):>10.2f}{p50:>10.2f}{p99:>10.2f}{samples[-1]:>10.1f}")


if __name__ == "__main__":
    main()
