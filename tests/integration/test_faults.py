"""Faults in production mode: a worker killed mid-batch, the API down while the SDK logs.

After each, every point must be stored exactly once with its exact value, and the
rollups must equal rollups computed from scratch from the stored points.
"""

from __future__ import annotations

import re
import time

from runcast_server.rollups import LEVELS
from services import wait_until
from sqlalchemy import text

from integration.helpers import (
    Driver,
    WireRun,
    assert_rollups_equal,
    expected_rollups,
    export_rows,
    point_count,
    post_batch,
    same,
    snapshot,
    value_at,
    wait_points,
)

# Unacknowledged tasks of a killed worker come back once the broker's visibility timeout
# has passed: kombu restores them when a worker starts polling (and then only every
# ~100 s). A short timeout, and waiting it out before the restart, keeps the test short;
# tasks here take well under a second, so nothing is restored while still running.
VISIBILITY_S = 5
TASK_RECEIVED = re.compile(r"Task runcast\.ingest_batch\[([0-9a-f-]+)\] received")
TASK_SUCCEEDED = re.compile(r"Task runcast\.ingest_batch\[([0-9a-f-]+)\] succeeded")
FAST_REDELIVERY = {"RUNCAST_BROKER_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S)}


def assert_consistent(stack, run_id: str, expected: dict[tuple[str, int], float]) -> None:
    snap = snapshot(stack.engine, run_id)
    points = {(key, step): v for (_seg, key, step), v in snap["points"].items()}
    assert set(points) == set(expected)
    wrong = [(k, points[k], v) for k, v in expected.items() if not same(points[k], v)]
    assert not wrong, f"{len(wrong)} stored values differ, e.g. {wrong[:5]}"
    assert_rollups_equal(snap["rollups"], expected_rollups(snap["points"], LEVELS))
    for (_seg, key), (count, min_step, max_step) in snap["series"].items():
        steps = [s for (k, s) in expected if k == key]
        assert (count, min_step, max_step) == (len(steps), min(steps), max(steps)), key


def in_transaction(engine) -> bool:
    """Whether another session on this database is running a statement or holds a transaction."""
    with engine.connect() as conn:
        return bool(conn.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')"
        )).scalar_one())


def test_worker_sigkilled_mid_batch(stack):
    stack.start_api()
    token = stack.token("faults")
    run = WireRun("faults", "kill-worker")
    batches, steps_per_batch, metrics = 20, 1000, 8
    expected: dict[tuple[str, int], float] = {}
    # Everything is queued before a worker runs, so the worker is busy from its first second.
    assert post_batch(stack.api_url, token, [run.started()]).status_code == 202
    for b in range(batches):
        events = []
        for step in range(b * steps_per_batch, (b + 1) * steps_per_batch):
            values = {f"m{k}": value_at(step, k) for k in range(metrics)}
            expected.update({(key, step): v for key, v in values.items()})
            events.append(run.metrics(step, values))
        r = post_batch(stack.api_url, token, events)
        assert r.status_code == 202, r.text
    total = len(expected)

    worker = stack.start_worker(**FAST_REDELIVERY)
    # SIGKILL while the worker is inside a batch's transaction, after it committed at least one.
    wait_until(lambda: point_count(stack.engine, run.run) > 0 and in_transaction(stack.engine), 120,
               "the worker to be inside a batch", interval=0.01)
    worker.kill()
    stored_at_kill = point_count(stack.engine, run.run)
    assert 0 < stored_at_kill < total, "the worker finished before it could be killed; make the batches larger"
    # The killed worker's reserved task becomes visible again after the timeout.
    time.sleep(VISIBILITY_S + 1)
    stack.start_worker(name="worker-restarted", **FAST_REDELIVERY)
    wait_points(stack.engine, run.run, total, timeout=300, procs=stack.processes[-1:])
    time.sleep(1)  # anything still in flight would show up as an extra point now
    assert point_count(stack.engine, run.run) == total
    assert_consistent(stack, run.run, expected)
    rows = export_rows(stack.api_url, run.run, token)
    assert len(rows) == total
    assert {(r["key"], r["step"]) for r in rows} == set(expected)
    # The batch the kill interrupted was redelivered to, and completed by, the restarted worker.
    first, second = worker.output(), stack.processes[-1].output()
    interrupted = set(TASK_RECEIVED.findall(first)) - set(TASK_SUCCEEDED.findall(first))
    assert interrupted, "the killed worker held no task"
    assert interrupted <= set(TASK_SUCCEEDED.findall(second))


def test_api_down_while_sdk_logs_spools_and_replays(stack):
    stack.start_worker()
    api = stack.start_api()
    port = int(stack.api_url.rsplit(":", 1)[1])
    token = stack.token("faults")
    steps, metrics = 3000, 2
    progress = stack.tmp / "progress"
    driver = Driver(stack, server=stack.api_url, token=token, project="faults", name="sdk",
                    steps=steps, metrics=metrics,
                    extra=["--sleep", "0.002", "--progress", str(progress), "--progress-every", "50"])
    run_id = driver.run_id

    def reached(step: int) -> bool:
        driver.proc.check_alive("logging")
        return progress.exists() and progress.read_text() != "" and int(progress.read_text()) >= step

    wait_until(lambda: reached(steps // 5), 120, "the SDK to log a fifth of the run", interval=0.02)
    api.kill()  # the API vanishes mid-request, the harshest way to stop it
    wait_until(lambda: reached(steps // 2), 120, "the SDK to keep logging with the API down", interval=0.05)
    assert driver.proc.running, "the SDK must not crash the training loop when the server is gone"
    stack.start_api(port=port, name="api-restarted")
    stats = driver.wait(timeout=300)["stats"]
    assert stats["spooled"] > 0 and stats["replayed"] > 0, stats  # the outage was felt, and healed
    assert stats["dropped"] == 0, stats

    expected = {(f"m{k}", s): value_at(s, k) for s in range(steps) for k in range(metrics)}
    wait_points(stack.engine, run_id, len(expected), timeout=300)
    time.sleep(1)
    assert point_count(stack.engine, run_id) == len(expected)
    assert_consistent(stack, run_id, expected)
    rows = export_rows(stack.api_url, run_id, token)
    for k in range(metrics):
        key_rows = [r for r in rows if r["key"] == f"m{k}"]
        assert [r["step"] for r in key_rows] == list(range(steps)), "export must list each step once, in order"
        assert all(same(r["value"], value_at(r["step"], k)) for r in key_rows)
