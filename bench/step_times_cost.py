"""The storage and ingest cost of the server's step times (the ``_timestamp`` series), before/after.

    .venv/bin/python bench/step_times_cost.py --checkout /tmp/wt-before --checkout . --rounds 2

For each checkout (its code: ``PYTHONPATH`` = its trainer, backend and tests), each database
(the embedded SQLite default, and PostgreSQL: a throwaway cluster, the API embedded on it, no
Redis) and each case, a fresh ``runcast serve`` stores one run the SDK logs in a child process:

* ``a``: 1 key a step, ``--fast-steps`` steps logged as fast as the SDK can (thinning to tenths
  of a second keeps few time points);
* ``b``: 8 keys a step, ``--paced-steps`` steps at a simulated 10 steps/s (the metrics events'
  ``ts`` 0.1 s apart: every step gets a time point);
* ``c``: 1 key a step, ``--paced-steps`` steps at a simulated 1 step/s (the worst case: a time
  point per logged point).

The pace is simulated by the SDK's clock (``runcast.run``'s ``time.time``) answering ``t0 + step x
interval``; the SDK still logs as fast as it can. Bytes: every table and index of the database
after the run, less those of the same database before it (SQLite: ``dbstat`` pages after
``VACUUM``; PostgreSQL: ``pg_total_relation_size`` after ``VACUUM``), divided by the points the
user logged. Points/s: logged points from the first ``log()`` to ``finish()`` returning (the
embedded API stores a batch before it answers). Rows: the ``points`` rows stored, all series.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CASES = {"a": (1, None), "b": (8, 0.1), "c": (1, 1.0)}  # case -> (keys a step, simulated seconds a step)


def client(args: argparse.Namespace) -> None:
    """The SDK side: log the case's steps (with the simulated clock, if paced), finish, print JSON."""
    import types

    import runcast
    import runcast.run_handle  # noqa: F401  (the module of Run; ``runcast.run`` is the current run)

    [case] = args.case
    keys, interval = CASES[case]
    names = [f"train/k{i}" for i in range(keys)]
    clock = {"step": 0}
    t0 = time.time() - 3600
    if interval is not None:  # only the metrics events' clock: the transport keeps the real one
        fake = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("__")})
        fake.time = lambda: t0 + clock["step"] * interval
        sys.modules["runcast.run_handle"].time = fake  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as spool:
        run = runcast.init("bench", f"step-times-{case}", server=args.server, token=args.token, spool_dir=spool,
                           capture_code=False, heartbeat_interval=3600, max_queue=args.steps * keys + 10)
        begin = time.perf_counter()
        for step in range(args.steps):
            clock["step"] = step
            run.log({k: step * 0.001 + i for i, k in enumerate(names)}, step=step)
        run.finish(timeout=900)
        print(json.dumps({"run": run.id, "seconds": time.perf_counter() - begin,
                          "spooled": run.stats.spooled, "dropped": run.stats.dropped}))


def sqlite_bytes(db: Path) -> tuple[int, int]:
    """(bytes of every table and index, points rows) of a SQLite database, after VACUUM."""
    with sqlite3.connect(db) as conn:
        conn.execute("VACUUM")
        size = conn.execute("SELECT COALESCE(SUM(pgsize), 0) FROM dbstat").fetchone()[0]
        rows = conn.execute("SELECT count(*) FROM points").fetchone()[0]
    return int(size), int(rows)


def pg_bytes(pg: Any, db: str) -> tuple[int, int]:
    """(bytes of every table, index and TOAST of schema public, points rows), after VACUUM."""
    pg.execute("VACUUM", database=db)
    [(size,)] = pg.execute(
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = "
        "c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm')", database=db)
    [(rows,)] = pg.execute("SELECT count(*) FROM points", database=db)
    return int(size), int(rows)


def one(checkout: Path, database: str, case: str, steps: int, pg: Any) -> dict[str, float]:
    """One fresh server of ``checkout`` on ``database``, one run of ``case``: bytes and points/s."""
    sys.path.insert(0, str(ROOT / "tests"))
    import services

    env = {"PYTHONPATH": os.pathsep.join(str(checkout / p) for p in ("trainer", "backend", "tests"))}
    with tempfile.TemporaryDirectory() as tmp:
        env["RUNCAST_DATA_DIR"] = str(Path(tmp) / "data")
        if database == "postgresql":
            name = pg.create_database()
            env["RUNCAST_DATABASE_URL"] = pg.url(name)
            subprocess.run([sys.executable, "-c", "import sys; from runcast_server.core import migrate; "
                            "migrate.upgrade(sys.argv[1])", pg.url(name)], env=services.child_env(env), check=True)
        token = services.create_token(env, "bench")
        proc, base = services.start_api(env, Path(tmp) / "api.log", timeout=120)
        try:
            db = next(Path(env["RUNCAST_DATA_DIR"]).rglob("*.db"), None)
            before = sqlite_bytes(db) if database == "sqlite" and db else pg_bytes(pg, name) if pg else (0, 0)
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, __file__, "--client", "--server", base, "--token", token,
                                  "--case", case, "--steps", str(steps)], env=services.child_env(env),
                                 capture_output=True, text=True)
        finally:
            proc.stop(timeout=20)
        if out.returncode:
            raise RuntimeError(f"the SDK side failed: {out.stderr[-3000:]}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if database == "sqlite":
            after = sqlite_bytes(next(Path(env["RUNCAST_DATA_DIR"]).rglob("*.db")))
        else:
            after = pg_bytes(pg, name)
            pg.drop_database(name)
    logged = steps * CASES[case][0]
    rows = after[1] - before[1]
    if rows < logged or result["spooled"] or result["dropped"]:
        raise RuntimeError(f"{checkout} {database} {case}: {rows} rows for {logged} points, {result}")
    return {"bytes_per_point": (after[0] - before[0]) / logged, "rows_per_point": rows / logged,
            "points_per_s": logged / result["seconds"], "load": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, action="append", help="a checkout to measure (repeatable)")
    parser.add_argument("--database", action="append", choices=("sqlite", "postgresql"))
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fast-steps", type=int, default=100_000, help="steps of case a")
    parser.add_argument("--paced-steps", type=int, default=10_000, help="steps of cases b and c")
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args)
        return
    sys.path.insert(0, str(ROOT / "tests"))
    import services

    checkouts = [c.resolve() for c in (args.checkout or [ROOT])]
    databases = args.database or ["sqlite", "postgresql"]
    cases = args.case or sorted(CASES)
    pg = services.PostgresServer().start() if "postgresql" in databases else None
    print(f"load at start {os.getloadavg()}", flush=True)
    results: dict[tuple[str, str, Path], list[dict[str, float]]] = {}
    try:
        for r in range(args.rounds):
            for database in databases:
                for case in cases:
                    for c in checkouts:  # alternated: a change in the machine's load hits every arm alike
                        steps = args.fast_steps if case == "a" else args.paced_steps
                        res = one(c, database, case, steps, pg)
                        results.setdefault((database, case, c), []).append(res)
                        print(f"round {r + 1} {database} {case} {c}: {res['bytes_per_point']:.1f} B/point, "
                              f"{res['rows_per_point']:.3f} rows/point, {res['points_per_s']:,.0f} points/s "
                              f"(load {res['load']:.2f})", flush=True)
    finally:
        if pg is not None:
            pg.stop()
    print(f"\n| database | case | checkout | bytes/point | rows/point | points/s (median of {args.rounds}) |")
    print("|---|---|---|---:|---:|---:|")
    for (database, case, c), rs in results.items():
        med = {k: statistics.median(x[k] for x in rs) for k in ("bytes_per_point", "rows_per_point", "points_per_s")}
        print(f"| {database} | {case} | {c.name} | {med['bytes_per_point']:.1f} | {med['rows_per_point']:.3f} "
              f"| {med['points_per_s']:,.0f} |")
    print(f"load at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
