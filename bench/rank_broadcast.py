"""The cost per step of every rank acting at the same step (docs/commands.md, "Several ranks"): two
processes over gloo on the CPU, each calling ``TorchRanks.decision`` once per step boundary, as the
reference trainer and the Hugging Face callback do, and Lightning's ``strategy.broadcast`` path
(``ObjectRanks`` over ``broadcast_object_list``) for comparison.

    PYTHONPATH=$PWD/trainer .venv/bin/python bench/rank_broadcast.py [--steps 2000]

Prints, per path, the median and p95 microseconds per boundary on rank 0 with no command (the
common case) and with a ``set`` of a declared tunable at every boundary (the values follow as objects).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time

import torch.distributed as dist
import torch.multiprocessing as mp
from runcast.integrations._ranks import Decision, ObjectRanks, Ranks, TorchRanks


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _time(ranks: Ranks, decision: Decision, steps: int) -> list[float]:
    rank0 = dist.get_rank() == 0
    out = []
    for _ in range(steps):
        t0 = time.perf_counter()
        ranks.decision(decision if rank0 else None)
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def _worker(rank: int, port: int, steps: int, results: dict[str, list[float]]) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    paths: dict[str, Ranks] = {"TorchRanks": TorchRanks(),
                               "ObjectRanks": ObjectRanks(lambda obj: _object_broadcast(obj))}
    for name, ranks in paths.items():
        for case, decision in (("no command", Decision()), ("set a tunable", Decision(values={"dropout": 0.1}))):
            _time(ranks, decision, steps // 10)  # warm-up
            times = _time(ranks, decision, steps)
            if rank == 0:
                results[f"{name}|{case}"] = times
    dist.destroy_process_group()


def _object_broadcast(obj: object) -> object:
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_worker, args=(_port(), args.steps, results), nprocs=2)
        print(f"{'path':<12} {'boundary':<14} {'steps':>6} {'p50 us':>8} {'p95 us':>8}")
        for key, times in sorted(results.items(), key=lambda kv: kv[0], reverse=True):
            name, case = key.split("|")
            p95 = statistics.quantiles(times, n=20)[-1]
            print(f"{name:<12} {case:<14} {len(times):>6} {statistics.median(times):>8.0f} {p95:>8.0f}")


if __name__ == "__main__":
    main()
