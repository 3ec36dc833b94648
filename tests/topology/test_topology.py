"""Two API processes and two Celery workers behind nginx, on PostgreSQL and Redis, seen from
the user's seat: the trainer and the viewers talk only to nginx.

Ordering of one run's batches across workers: any worker may take any batch. The ingest
task locks the run's row (``SELECT ... FOR UPDATE``) before it writes, so the batches of
one run commit one at a time, each as the next run version; every write is keyed (points
by series and step, rollups merged from the points really inserted), so the stored run is
the same whatever order the batches commit in, and the live stream sends the versions in
commit order, each once (docs/deployment.md, "Several API processes and workers").
"""

from __future__ import annotations

import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from integration.helpers import (
    Driver,
    WireRun,
    export_rows,
    point_count,
    post_batch,
    start_beat,
    value_at,
    wait_points,
)
from runcast.wire import events as ev
from services import free_port, wait_until
from sqlalchemy import text

from topology.viewers import Viewer

pytestmark = pytest.mark.slow

FAST_STREAMS = {"RUNCAST_STREAM_KEEPALIVE_S": "1", "RUNCAST_STREAM_POLL_S": "1"}
# The sweeper enqueues again, after 3 s, a batch whose worker died holding it.
FAST_SWEEPER = {"RUNCAST_INBOX_REDELIVER_AFTER_S": "3", "RUNCAST_INBOX_SWEEP_INTERVAL_S": "1"}


def topology(stack: Any, start_nginx: Any) -> dict[str, Any]:
    """Workers a and b, beat, API processes a and b, and nginx in front of both."""
    stack.env.update(FAST_STREAMS | FAST_SWEEPER)
    ports = [free_port(), free_port()]
    with ThreadPoolExecutor(5) as pool:  # started side by side: each start is mostly imports
        workers = [pool.submit(stack.start_worker, name=f"worker-{n}") for n in "ab"]
        beat = pool.submit(start_beat, stack)
        apis = [pool.submit(stack.start_api, name=f"api-{n}", port=p) for n, p in zip("ab", ports)]
        beat.result()
        t = {"workers": [f.result() for f in workers], "apis": [f.result() for f in apis]}
    t["urls"] = [f"http://127.0.0.1:{p}" for p in ports]
    t["proxy"] = start_nginx(t["urls"])
    return t


def sse_viewers(url: str) -> float:
    """``runcast_sse_viewers`` of the process at ``url`` (its own /metrics)."""
    body = httpx.get(f"{url}/metrics", timeout=10).text
    match = re.search(r"^runcast_sse_viewers(?:\{[^}]*\})? (\S+)$", body, re.MULTILINE)
    assert match, body[:2000]
    return float(match.group(1))


def points_accepted(url: str) -> float:
    body = httpx.get(f"{url}/metrics", timeout=10).text
    match = re.search(r"^runcast_ingest_points_accepted_total (\S+)$", body, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def run_version(engine: Any, run_id: str) -> int:
    with engine.connect() as conn:
        return conn.execute(text("SELECT coalesce(max(version), 0) FROM run_versions WHERE run_id = :r"),
                            {"r": run_id}).scalar_one()


def finished(engine: Any, run_id: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(text("SELECT status FROM runs WHERE id = :r"), {"r": run_id}).scalar() == "finished"


def watch(proxy_url: str, run_id: str, n: int) -> list[Viewer]:
    """``n`` viewers through nginx; nginx's round robin puts them on both API processes."""
    url = f"{proxy_url}/api/v1/runs/{run_id}/stream"
    viewers = []
    for i in range(n):
        viewers.append(Viewer(url, f"viewer-{i}").start())
        wait_until(lambda: viewers[-1].connections > 0, 30, f"viewer {i} to connect")
    return viewers


def stored_times(engine: Any, run_id: str) -> dict[int, float]:
    """The run's step times as stored (the server's ``_timestamp`` series; one segment here)."""
    with engine.connect() as conn:
        return dict(conn.execute(text(
            "SELECT p.step, p.value FROM points p JOIN series s ON s.id = p.series_id"
            " WHERE s.run_id = :r AND s.key = '_timestamp'"), {"r": run_id}).all())


def assert_saw_everything(viewers: list[Viewer], version: int, expected: dict[tuple[str, int], Any],
                          notes: list[str], times: dict[int, float]) -> None:
    """Every viewer got versions 1..version once each, in order, exactly the stored points, and
    exactly the stored step times."""
    wire = {k: ev.encode_value(v) for k, v in expected.items()}
    for v in viewers:
        wait_until(lambda v=v: v.last >= version, 60, f"{v.name} to reach version {version} (at {v.last})")
    for v in viewers:
        v.close()
        ids = [m.id for m in v.received]
        assert ids == list(range(1, version + 1)), f"{v.name}: versions {ids[:5]}...{ids[-5:]}, refused {v.refused}"
        assert {m.event for m in v.received} == {"batch"}
        got = v.points()
        assert len(got) == len(wire), f"{v.name}: {len(got)} points, {len(wire)} stored"
        assert {(key, step): value for key, _seg, step, value in got} == wire
        assert sorted(v.notes()) == sorted(notes)
        got_times = v.points(times=True)
        assert len(got_times) == len(times) and {step: at for _k, _seg, step, at in got_times} == times, v.name


def test_interleaved_batches_reach_viewers_on_both_api_processes_in_order(stack, start_nginx):
    t = topology(stack, start_nginx)
    proxy, urls = t["proxy"], t["urls"]
    token = stack.token("topology")
    run = WireRun("topology", "interleaved")
    assert post_batch(proxy.url, token, [run.started(alerts={"enabled": False})]).status_code == 202
    wait_until(lambda: run_version(stack.engine, run.run) == 1, 60, "the run to exist")
    viewers = watch(proxy.url, run.run, 4)
    per_api = [sse_viewers(u) for u in urls]
    assert per_api == [2.0, 2.0], per_api  # round robin: two viewers on each process

    # Batch i holds the steps = i (mod 24): every batch interleaves with every other one, and
    # they go out shuffled, alternately to each API process, and from there to either worker.
    batches, per_batch, keys = 24, 40, ("loss", "lr", "grad_norm")
    steps = batches * per_batch
    expected: dict[tuple[str, int], Any] = {}
    bodies, notes = [], []
    for i in range(batches):
        events = []
        for step in range(i, steps, batches):
            values = {k: value_at(step, j) for j, k in enumerate(keys)}
            expected.update({(k, step): v for k, v in values.items()})
            events.append(run.metrics(step, values))
        if i % 6 == 0:
            notes.append(f"note of batch {i}")
            events.append(run.event("note", text=notes[-1], step=None))
        bodies.append(events)
    random.Random(15).shuffle(bodies)
    for events in bodies:
        r = post_batch(proxy.url, token, events)
        assert r.status_code == 202, r.text
    assert post_batch(proxy.url, token, [run.finished(steps - 1)]).status_code == 202

    wait_points(stack.engine, run.run, len(expected), timeout=120, procs=t["workers"])
    wait_until(lambda: finished(stack.engine, run.run), 60, "the run to finish")
    version = run_version(stack.engine, run.run)
    assert version == 1 + batches + 1  # one version per batch, none lost, none doubled
    assert_saw_everything(viewers, version, expected, notes, stored_times(stack.engine, run.run))

    # What was stored, read back through nginx, equals what was sent; both workers took batches.
    rows = export_rows(proxy.url, run.run, token)
    assert len(rows) == len(expected)
    assert {(r["key"], r["step"]) for r in rows} == set(expected)
    for w in t["workers"]:
        assert "runcast.ingest_batch" in w.output() and "succeeded" in w.output(), w.name
    # Each API process counted the points it accepted; together exactly the points sent.
    accepted = [points_accepted(u) for u in urls]
    assert min(accepted) > 0 and sum(accepted) == len(expected), accepted


def test_killed_worker_and_api_process_cost_nothing_and_viewers_resume(stack, start_nginx):
    t = topology(stack, start_nginx)
    proxy = t["proxy"]
    token = stack.token("topology")
    steps, metrics = 3000, 2
    progress = stack.tmp / "progress"
    driver = Driver(stack, server=proxy.url, token=token, project="topology", name="sdk", steps=steps,
                    metrics=metrics, extra=["--sleep", "0.002", "--batch-size", "100", "--progress", str(progress),
                                            "--progress-every", "50", "--retry-max", "0.5"])
    run_id = driver.run_id

    def reached(step: int) -> bool:
        driver.proc.check_alive("logging")
        return progress.exists() and int(progress.read_text() or 0) >= step

    wait_until(lambda: run_version(stack.engine, run_id) >= 1, 60, "the run to exist")
    viewers = watch(proxy.url, run_id, 4)
    # nginx deals connections round robin with the trainer's requests among them, so the split of
    # viewers varies; the process killed below is one that holds viewers.
    counts = [sse_viewers(u) for u in t["urls"]]
    assert sum(counts) == 4.0, counts
    victim = max(range(len(counts)), key=lambda i: counts[i])
    survivor = 1 - victim

    wait_until(lambda: reached(steps // 4), 120, "a quarter of the run", interval=0.02)
    wait_until(lambda: "succeeded" in t["workers"][0].output(), 60, "worker a to store batches")
    t["workers"][0].kill()  # SIGKILL, whatever batch it holds
    wait_until(lambda: reached(steps // 2), 120, "half of the run", interval=0.02)
    t["apis"][victim].kill()  # SIGKILL: its viewers' streams break, requests in flight fail
    stats = driver.wait(timeout=300)["stats"]
    assert stats["dropped"] == 0, stats

    expected = {(f"m{k}", s): value_at(s, k) for s in range(steps) for k in range(metrics)}
    wait_points(stack.engine, run_id, len(expected), timeout=120, procs=t["workers"][1:])
    wait_until(lambda: finished(stack.engine, run_id), 60, "the run to finish")
    time.sleep(2)  # nothing more arrives (a redelivered batch stores nothing twice)
    assert point_count(stack.engine, run_id) == len(expected)
    version = run_version(stack.engine, run_id)
    assert_saw_everything(viewers, version, expected, [], stored_times(stack.engine, run_id))
    # The viewers of the killed process came back through nginx, on the other one.
    assert sum(v.connections > 1 for v in viewers) >= counts[victim], [v.connections for v in viewers]
    assert sse_viewers(t["urls"][survivor]) == 0.0  # all closed
    rows = export_rows(proxy.url, run_id, token)
    assert len(rows) == len(expected) and {(r["key"], r["step"]) for r in rows} == set(expected)
