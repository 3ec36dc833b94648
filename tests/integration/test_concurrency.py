"""Two workers ingesting batches of one run at once, out of order, write exactly what one
worker writes in order: the same points and the same rollup rows. Two workers taking a run's
batches as the API accepted them raise the alerts that one worker raises."""

from __future__ import annotations

import math
import random

from runcast_server.core.db import make_engine
from runcast_server.metrics.rollups import LEVELS
from services import wait_until
from sqlalchemy import text

from integration.helpers import (
    WireRun,
    post_batch,
    assert_rollups_equal,
    celery_client,
    expected_rollups,
    same,
    send_batch_task,
    snapshot,
    value_at,
    wait_points,
)

BATCHES, PER_BATCH, METRICS = 24, 250, 4
STEPS = BATCHES * PER_BATCH


def make_batches(run: WireRun) -> tuple[list, list[list], list]:
    """run_started, the metric batches, and the finish; batch i holds the steps ≡ i (mod BATCHES),
    so every batch touches every rollup bucket (the most contention there can be)."""
    started = [run.started()]
    batches = []
    for i in range(BATCHES):
        events = []
        for step in range(i, STEPS, BATCHES):
            values = {f"m{k}": value_at(step, k) for k in range(METRICS)}
            if step % 97 == 5:
                values["m1"] = math.nan
            if step % 389 == 3:
                values["m2"] = math.inf if step % 2 else -math.inf
            events.append(run.metrics(step, values))
        batches.append(events)
    finished = [run.finished(STEPS - 1)]
    return started, batches, finished


def ingest(stack, engine, token: str, run: WireRun, order: list[list], started: list, finished: list,
           procs) -> dict:
    client = celery_client(stack.redis_url)

    def row(sql: str):
        with engine.connect() as conn:
            return conn.execute(text(sql), {"r": run.run}).first()

    send_batch_task(client, started, token)
    wait_until(lambda: row("SELECT 1 FROM runs WHERE id = :r"), 60, "the run to exist")
    for batch in order:
        send_batch_task(client, batch, token)
    wait_points(engine, run.run, STEPS * METRICS, timeout=300, procs=procs)
    send_batch_task(client, finished, token)
    wait_until(lambda: row("SELECT 1 FROM runs WHERE id = :r AND status = 'finished'"), 60, "the finish")
    return snapshot(engine, run.run)


def test_two_workers_out_of_order_equal_one_worker_in_order(stack, pg_server, pg_template):
    # The same run (same ids, same seq numbers) goes to two databases.
    run = WireRun("concurrency", "c")
    started, batches, finished = make_batches(run)

    # Reference: one worker, batches in order.
    one = stack.start_worker(name="worker-one")
    reference = ingest(stack, stack.engine, stack.token("concurrency"), run, batches, started, finished, [one])
    one.stop()

    # Two worker processes, shuffled batches, some delivered twice (a redelivery).
    db_b = pg_server.create_database(template=pg_template)
    url_b = pg_server.url(db_b)
    engine_b = make_engine(url_b)
    try:
        env_b = {"RUNCAST_DATABASE_URL": url_b}
        workers = [stack.start_worker(name=f"worker-{i}", **env_b) for i in range(2)]
        from runcast_server.core.auth import create_token
        from sqlalchemy.orm import Session

        with Session(engine_b) as session:
            token_b = create_token(session, "concurrency")
            session.commit()
        rng = random.Random(1234)
        shuffled = batches + [batches[3], batches[17], batches[0]]
        rng.shuffle(shuffled)
        concurrent = ingest(stack, engine_b, token_b, run, shuffled, started, finished, workers)
        logs = [w.output() for w in workers]
    finally:
        engine_b.dispose()
        for p in list(stack.processes):
            if p.name.startswith("worker-") and p.name != "worker-one":
                p.stop()
        pg_server.drop_database(db_b)

    assert all("succeeded" in log for log in logs), "both workers must have ingested batches"
    assert len(reference["points"]) == STEPS * METRICS
    assert concurrent["points"].keys() == reference["points"].keys()
    differ = [k for k, v in reference["points"].items() if not same(v, concurrent["points"][k])]
    assert not differ, f"{len(differ)} points differ, e.g. {differ[:5]}"
    assert concurrent["series"] == reference["series"]
    assert concurrent["run"] == reference["run"]
    # Rollups: equal to each other and to rollups computed from scratch.
    assert_rollups_equal(concurrent["rollups"], reference["rollups"], rel=1e-12)
    assert_rollups_equal(reference["rollups"], expected_rollups(reference["points"], LEVELS))


def test_two_workers_detect_a_runs_batches_in_the_order_they_were_accepted(stack):
    """An SDK's batches, posted one after the other, then taken by a worker's two processes at
    once: the process with a short batch n + 1 may store and detect it while the other still
    reads the long batch n. Every spike is reported all the same (before the detectors took a
    run's rows in order, batch n's points were then never looked at)."""
    sizes = [1000, 10] * 15  # long batches, each with a spike in its middle, and short ones
    edges = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    spikes = [lo + 500 for lo, size in zip(edges, sizes) if size == 1000]
    run = WireRun("order", "spikes")
    token = stack.token("order")
    stack.start_api()
    assert post_batch(stack.api_url, token, [run.started()]).status_code == 202
    for lo, hi in zip(edges, edges[1:]):
        events = [run.metrics(s, {"loss": (4.0 if any(0 <= s - x < 3 for x in spikes) else 1.0)
                                  + 0.01 * math.sin(s)}) for s in range(lo, hi)]
        assert post_batch(stack.api_url, token, events).status_code == 202
    # The worker starts with the whole run queued (a restart under a backlog, a spool replayed),
    # with two processes, as `runcast worker` runs on two CPUs: each takes tasks ahead.
    workers = [stack.start_worker(concurrency=2, pool="prefork")]
    wait_points(stack.engine, run.run, edges[-1], procs=workers)

    def detected():
        with stack.engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM ingest_inbox WHERE state <> 'done'")).scalar_one() == 0

    wait_until(detected, 120, "every batch detected")
    with stack.engine.connect() as conn:
        opened = [row[0] for row in conn.execute(
            text("SELECT step FROM alerts WHERE run_id = :r AND kind = 'spike' ORDER BY step"), {"r": run.run})]
    log = workers[0].output()
    assert "ForkPoolWorker-1" in log and "ForkPoolWorker-2" in log, "both processes must have taken batches"
    assert opened == spikes
