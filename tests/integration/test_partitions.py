"""Per-run partitions on PostgreSQL, from the user's seat: two runs ingested at once by two
Celery workers each land in partitions of their own; deleting one drops exactly its
partitions and leaves every point of the other; a read of one series scans one partition."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from integration.helpers import WireRun, point_count, post_batch, wait_points

pytestmark = pytest.mark.timeout(300)

STEPS, METRICS, PER_BATCH = 2000, 4, 50
TABLES = ("points", "rollups", "run_versions")


def _ingest_two_runs(stack: Any) -> tuple[str, list[WireRun]]:
    workers = [stack.start_worker(name=f"worker-{i}") for i in range(2)]
    stack.start_api()
    token = stack.token("parts")
    runs = [WireRun("parts", name) for name in ("one", "two")]
    for run in runs:
        assert post_batch(stack.api_url, token, [run.started()]).status_code == 202
    for lo in range(0, STEPS, PER_BATCH):  # the two runs' batches interleaved
        for k, run in enumerate(runs):
            batch = [run.metrics(s, {f"m{m}": s * 0.5 + m + k for m in range(METRICS)}) for s in range(lo, lo + PER_BATCH)]
            assert post_batch(stack.api_url, token, batch).status_code == 202
    for run in runs:
        wait_points(stack.engine, run.run, STEPS * METRICS, timeout=240, procs=workers)
    logs = [w.output() for w in workers]
    assert all("succeeded" in log for log in logs), "both workers must have stored batches"
    return token, runs


def _scalar(stack: Any, sql: str, **params: Any) -> Any:
    with stack.engine.connect() as conn:
        return conn.execute(text(sql), params).scalar()


def _partitions(stack: Any) -> set[str]:
    with stack.engine.connect() as conn:
        return set(conn.execute(text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname IN ('points', 'rollups', 'run_versions')"
        )).scalars())


def _relations(node: dict[str, Any], executed_only: bool = False) -> set[str]:
    """Tables the plan scans (with ``executed_only``: only nodes that ran, from EXPLAIN ANALYZE)."""
    here = set()
    if "Relation Name" in node and not (executed_only and node.get("Actual Loops", 1) == 0):
        here.add(node["Relation Name"])
    return here.union(*(_relations(child, executed_only) for child in node.get("Plans", [])))


def _pruned_at_start(node: dict[str, Any]) -> int:
    """Partitions pruned at executor start anywhere in the plan (the Append may sit under a Sort)."""
    return node.get("Subplans Removed", 0) + sum(_pruned_at_start(child) for child in node.get("Plans", []))


def test_two_runs_own_partitions_delete_drops_only_ones_own_and_reads_prune(stack):
    token, (one, two) = _ingest_two_runs(stack)
    blocks = {run.run: _scalar(stack, "SELECT block FROM runs WHERE id = :r", r=run.run) for run in (one, two)}
    assert len(set(blocks.values())) == 2 and all(b >= 1 << 16 for b in blocks.values())
    for run in (one, two):
        block = blocks[run.run]
        assert _scalar(stack, "SELECT count(*) FROM series WHERE run_id = :r AND id >> 24 <> :b",
                       r=run.run, b=block) == 0
        assert _scalar(stack, f"SELECT count(*) FROM points_b{block} WHERE series_id IN"
                       " (SELECT id FROM series WHERE key <> '_timestamp')") == STEPS * METRICS
        assert _scalar(stack, f"SELECT count(*) FROM rollups_b{block}") == _scalar(
            stack, "SELECT count(*) FROM rollups r JOIN series s ON s.id = r.series_id WHERE s.run_id = :r", r=run.run)
        assert _scalar(stack, f"SELECT count(DISTINCT run_id) FROM run_versions_b{block}") == 1
        assert _scalar(stack, f"SELECT count(*) FROM run_versions_b{block}") == _scalar(
            stack, "SELECT count(*) FROM run_versions WHERE run_id = :r", r=run.run) >= STEPS // PER_BATCH
    own = {run.run: {f"{t}_b{blocks[run.run]}" for t in TABLES} for run in (one, two)}
    before = _partitions(stack)
    assert own[one.run] | own[two.run] <= before

    # A read of one series, as the metrics read asks it: one partition in the plan, and
    # with a generic plan (a prepared statement reused) one partition executed, the rest pruned at start.
    sid = _scalar(stack, "SELECT id FROM series WHERE run_id = :r AND key = 'm2'", r=two.run)
    read = "SELECT step, value FROM points WHERE series_id = {} AND step >= {} AND step <= {} ORDER BY step"
    with stack.engine.connect() as conn:
        [plan] = conn.execute(text("EXPLAIN (FORMAT JSON) " + read.format(sid, 100, 299))).scalar_one()
        assert _relations(plan["Plan"]) == {f"points_b{blocks[two.run]}"}
        conn.execute(text("SET plan_cache_mode = force_generic_plan"))
        conn.execute(text("PREPARE window_read(bigint, bigint, bigint) AS " + read.format("$1", "$2", "$3")))
        [generic] = conn.execute(text(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE window_read({sid}, 100, 299)")).scalar_one()
        conn.execute(text("DEALLOCATE window_read"))
    assert _relations(generic["Plan"], executed_only=True) == {f"points_b{blocks[two.run]}"}
    assert _pruned_at_start(generic["Plan"]) >= 1, json.dumps(generic)

    r = httpx.delete(f"{stack.api_url}/api/v1/runs/{one.run}", headers={"Authorization": f"Bearer {token}"},
                     timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["points"] == STEPS * METRICS
    assert _partitions(stack) == before - own[one.run]
    assert [_scalar(stack, f"SELECT to_regclass('{name}') IS NULL") for name in sorted(own[one.run])] == [True] * 3
    assert _scalar(stack, "SELECT count(*) FROM series WHERE run_id = :r", r=one.run) == 0
    assert point_count(stack.engine, two.run) == STEPS * METRICS
    logged = "series_id IN (SELECT id FROM series WHERE key <> '_timestamp')"  # not the step times
    assert _scalar(stack, f"SELECT count(*) FROM points WHERE {logged}") == STEPS * METRICS
    assert _scalar(stack, f"SELECT sum(value) FROM points WHERE {logged}") == sum(
        s * 0.5 + m + 1 for s in range(STEPS) for m in range(METRICS))
    metrics = httpx.get(f"{stack.api_url}/api/v1/runs/{two.run}/metrics", params={"key": "m3", "max_points": 100},
                        timeout=30).json()
    assert sum(metrics["series"][0]["count"]) == STEPS


def test_making_a_runs_partitions_waits_for_no_other_runs_batch(pg_url):
    """``partitions.create`` beside an open transaction that is storing a batch of another run
    (it updated ``runs``, wrote ``points``, read ``run_versions``) waits for none of its locks."""
    from runcast_server.core.db import make_engine
    from runcast_server.record import partitions

    engine = make_engine(pg_url)
    try:
        with engine.connect() as other, engine.connect() as conn:
            other.execute(text("INSERT INTO projects (id, name, created_at) VALUES (1, 'p', 0)"))
            other.execute(text(
                "INSERT INTO runs (id, project_id, name, visibility, status, config, code, env, created_at,"
                " last_values, version) VALUES ('run-aaaa-1', 1, 'n', 'public', 'running', '{}', '{}', '{}', 0, '{}', 0)"))
            partitions.create(other, "run-aaaa-1", 1 << 16)
            other.commit()
            other.execute(text("UPDATE runs SET version = 1 WHERE id = 'run-aaaa-1'"))
            other.execute(text(f"INSERT INTO points VALUES ({(1 << 40) + 1}, 0, 1.0, 1)"))
            other.execute(text("SELECT count(*) FROM run_versions"))
            conn.execute(text("SET lock_timeout = '2s'"))
            partitions.create(conn, "run-bbbb-2", (1 << 16) + 1)  # raises LockNotAvailable if it waited
            assert conn.execute(text("SELECT count(*) FROM points_b65537")).scalar() == 0
            conn.rollback()
            other.rollback()
    finally:
        engine.dispose()
