"""Server time of the runs table (GET /runs with filter=, sort=, group_by=) on a project of 10^4 runs.

Fills a fresh database (embedded SQLite in a temp dir; ``--postgres``: also a throwaway
PostgreSQL, the test suite's ``services.PostgresServer``) with ``--runs`` runs of project
``bench`` written straight into the tables (no ingest): each with a config (lr, batch size,
optimizer, warmup, a nested model block), a summary (acc), last values of train/loss and
val/loss, one of 100 groups, a tag on every tenth run (public ones), 90% public; plus 1,000 private runs of
another project with a project policy withholding its config (PostgreSQL: then ``ANALYZE``, the
statistics autovacuum keeps on a live server). Then times
``runs.queries.list_runs`` (what the route calls: SQL, publication views, the response models)
for each query, ``--repeat`` times in a fresh session, as an anonymous reader and as the
project's team; medians and 95th percentiles in ms. Usage::

    .venv/bin/python bench/runs_table.py --runs 10000 --repeat 20 [--postgres]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # services.py: the test suite's server helpers

import services
from runcast_server.alerts.service import stall_after_sql
from runcast_server.core import migrate
from runcast_server.core.auth import create_token
from runcast_server.core.db import make_engine
from runcast_server.core.models import Project
from runcast_server.policy.models import ProjectPolicy
from runcast_server.record.models import Run
from runcast_server.runs.columns import parse_column, parse_filter
from runcast_server.runs.models import RunTag
from runcast_server.runs.queries import list_runs
from runcast_server.runs.table import Table
from sqlalchemy import Engine, insert, select
from sqlalchemy.orm import Session

OPTIMIZERS = ("adam", "adamw", "sgd", "lion")


def fill(engine: Engine, n: int) -> int:
    """Write ``n`` runs of ``bench`` and 1,000 private runs of ``other``; returns bench's id."""
    rng = random.Random(7)
    with Session(engine) as session, session.begin():
        create_token(session, "bench")
        create_token(session, "other")
        bench = session.scalar(select(Project.id).where(Project.name == "bench"))
        other = session.scalar(select(Project.id).where(Project.name == "other"))
        assert bench is not None and other is not None
        session.add(ProjectPolicy(project_id=other, settings={"config": "none"}, updated_at=time.time()))
    now = time.time() - n
    rows, tags = [], []
    for i in range(n + 1000):
        mine = i < n
        lr = 10 ** rng.uniform(-5, -2)
        loss = 2.0 + 3 * rng.random()
        rows.append({
            "id": f"r{i:07d}", "project_id": bench if mine else other, "name": f"run-{i}",
            "visibility": ("public" if i % 10 else "unlisted") if mine else "private",
            "status": rng.choice(("finished", "finished", "failed", "running")), "created_at": now + i,
            "started_at": now + i, "finished_at": now + i + 60, "heartbeat_at": now + i + 60, "last_step": 1000,
            "config": {"lr": lr, "batch_size": rng.choice((32, 64, 128)), "optimizer": rng.choice(OPTIMIZERS),
                       "warmup": rng.randint(0, 2000), "model": {"d_model": 512, "layers": 8}},
            "summary": {"acc": rng.random()},
            "last_values": {"train/loss": [1000, loss], "val/loss": [1000, loss + 0.1]},
            "group_name": f"sweep-{i % 100}", "code": {}, "env": {}, "version": 1,
        })
        if i % 10 == 5:
            tags.append({"run_id": f"r{i:07d}", "tag": "baseline"})
    with engine.begin() as conn:
        for start in range(0, len(rows), 2000):
            conn.execute(insert(Run), rows[start:start + 2000])
        conn.execute(insert(RunTag), tags)
        if engine.dialect.name == "postgresql":  # the statistics autovacuum keeps on a live server
            conn.exec_driver_sql("ANALYZE")
    return bench


def table(**kw: Any) -> Table:
    return Table(
        columns=[parse_column(c, "column") for c in kw.pop("columns", [])],
        filters=[parse_filter(json.dumps(f)) for f in kw.pop("filters", [])],
        sort=parse_column(kw.pop("sort"), "sort") if "sort" in kw else None, **kw,
    )


QUERIES: list[tuple[str, dict[str, Any], Table]] = [
    ("newest first (cursor)", {}, table()),
    ("filter optimizer = adam, lr >= 1e-3", {},
     table(filters=[["config.optimizer", "eq", "adam"], ["config.lr", "ge", 1e-3]])),
    ("sort config.lr asc", {}, table(sort="config.lr", order="asc")),
    ("sort config.lr asc, offset 5000", {}, table(sort="config.lr", order="asc", offset=5000)),
    ("filter lr <= 3e-3, sort metric.val/loss", {},
     table(filters=[["config.lr", "le", 3e-3]], sort="metric.val/loss", order="asc")),
    ("status + tag + time, sort summary.acc", {"status": "finished", "tag": "baseline"},
     table(filters=[["created_at", "ge", 0.0]], sort="summary.acc")),
    ("group_by group, 3 aggregates", {},
     table(group_by="group", columns=["config.lr", "metric.train/loss", "summary.acc"])),
    ("5 columns, filter batch_size = 64", {},
     table(columns=["config.lr", "config.optimizer", "config.batch_size", "metric.train/loss", "summary.acc"],
           filters=[["config.batch_size", "eq", 64]])),
]


def time_query(engine: Engine, viewer_name: str | None, plain: dict[str, Any], t: Table,
               repeat: int) -> tuple[float, float, int]:
    times = []
    shown = 0
    for _ in range(repeat):
        with Session(engine) as session:
            viewer = session.scalar(select(Project).where(Project.name == viewer_name)) if viewer_name else None
            began = time.perf_counter()
            page = list_runs(session, viewer=viewer, project="bench", status=plain.get("status"), tag=plain.get("tag"),
                             limit=50, cursor=None, stall_after=stall_after_sql(300.0), table=t)
            times.append((time.perf_counter() - began) * 1000)
            shown = len(page.runs)
    times.sort()
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)], shown


def run(label: str, url: str, n: int, repeat: int, out: Callable[[str], None]) -> None:
    migrate.upgrade(url)
    engine = make_engine(url)
    began = time.perf_counter()
    fill(engine, n)
    out(f"\n{label}: {n} runs of bench + 1000 private runs of other, filled in {time.perf_counter() - began:.1f} s")
    out("| query | reader | runs on page | median ms | p95 ms |\n|---|---|---:|---:|---:|")
    for name, plain, t in QUERIES:
        for reader in (None, "bench"):
            median, p95, shown = time_query(engine, reader, plain, t, repeat)
            out(f"| {name} | {reader or 'anonymous'} | {shown} | {median:.1f} | {p95:.1f} |")
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run("embedded SQLite", f"sqlite:///{tmp}/bench.db", args.runs, args.repeat, print)
    if args.postgres:
        pg = services.PostgresServer().start()
        try:
            run("PostgreSQL (fsync off, shared_buffers 128MB)", pg.url(), args.runs, args.repeat, print)
        finally:
            pg.stop()


if __name__ == "__main__":
    main()
