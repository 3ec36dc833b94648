"""store_batch on SQLite and PostgreSQL: idempotent, order-independent, exact rollups."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runcast.wire.events import validate_event
from runcast.wire.limits import TIMESTAMP_KEY
from runcast_server.core.auth import create_token, hash_token
from runcast_server.ingest.results import ForeignRun, UnknownRun
from runcast_server.ingest.store import store_batch
from runcast_server.metrics.rollups import LEVELS, SUM_LIMIT
from runcast_server.record.models import Run
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from backend.helpers import TABLES, metrics, snapshot, started, wire


def store(engine: Engine, project_id: int, events: list[dict[str, Any]], received_at: float = 1000.0) -> Any:
    with Session(engine) as session:
        result = store_batch(session, project_id, [validate_event(e) for e in events], received_at=received_at)
        session.commit()
    return result


def run_row(engine: Engine, run: str = "run_aaaaaaaa") -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.execute(select(Run.__table__).where(Run.id == run)).mappings().one())


def test_first_batch_creates_run_segment_series(engine: Engine, project_id: int) -> None:
    logged_event = metrics(10, {"loss": 2.5, "acc": "NaN"}, seq=1)
    result_ts = logged_event["ts"]
    result = store(engine, project_id, [started(seq=0, config={"lr": 3e-4}), logged_event])
    assert result.points_inserted == 2 and result.events_inserted == 1
    [(run, message)] = result.messages()
    assert run == "run_aaaaaaaa"
    assert message["version"] == 1 and message["last_step"] == 10 and message["keys"] == ["_timestamp", "acc", "loss"]
    row = run_row(engine)
    assert row["version"] == 1 and row["status"] == "running" and row["last_step"] == 10
    assert row["config"] == {"lr": 3e-4}
    assert row["last_values"] == {"loss": [10, 2.5], "acc": [10, "NaN"]}
    assert row["heartbeat_at"] == 1000.0
    with engine.connect() as conn:
        logged = "series_id IN (SELECT id FROM series WHERE key <> '_timestamp')"
        assert conn.execute(text(f"SELECT step, value, version FROM points WHERE {logged} ORDER BY value NULLS FIRST")
                            ).all() == [(10, None, 1), (10, 2.5, 1)]
        assert conn.execute(text("SELECT count, min_step, max_step FROM series")).all() == [(1, 10, 10)] * 3
        # The step's wall time: the metrics event's ts, in the server's own series.
        [(key, step, at)] = conn.execute(text(
            "SELECT s.key, p.step, p.value FROM points p JOIN series s ON s.id = p.series_id WHERE NOT " + logged)).all()
        assert (key, step, at) == (TIMESTAMP_KEY, 10, result_ts)


def test_duplicate_delivery_changes_nothing(engine: Engine, project_id: int) -> None:
    batch = [started(seq=0), *(metrics(s, {"loss": 1 / (s + 1), "x": "Infinity"}, seq=s + 1) for s in range(50)),
             wire("note", seq=60, text="hello", step=3), wire("heartbeat", seq=61, step=49)]
    first = store(engine, project_id, batch)
    before = snapshot(engine)
    again = store(engine, project_id, batch)
    assert (again.points_inserted, again.events_inserted, again.messages()) == (0, 0, [])
    assert snapshot(engine) == before
    # A later redelivery (the heartbeat stamp is the time the batch arrived) also changes nothing.
    shuffled = list(reversed(batch))
    assert store(engine, project_id, shuffled).messages() == []
    assert snapshot(engine) == before
    assert first.points_inserted == 100


def test_a_step_redelivered_in_another_batch_adds_no_step_time(engine: Engine, project_id: int) -> None:
    """Step times are thinned per batch (the first step of a batch always gets one), yet a step
    delivered again at another batch edge writes nothing: a time goes in only with a new point."""
    first = [metrics(step, {"loss": 1.0}, seq=step) for step in range(1, 4)]
    for event in first:
        event["ts"] = 1000.0  # one tenth of a second: only step 1 keeps a time
    store(engine, project_id, [started(seq=0), *first])
    before = snapshot(engine)
    again = store(engine, project_id, [first[2], first[1]])  # step 3 now opens a batch
    assert (again.points_inserted, again.messages()) == (0, [])
    assert snapshot(engine) == before
    later = metrics(4, {"loss": 0.5}, seq=4)
    later["ts"] = 1000.05  # the same tenth, but the first step of its batch: it gets its own time
    store(engine, project_id, [first[0], later])
    with engine.connect() as conn:
        assert conn.execute(text(
            "SELECT p.step, p.value FROM points p JOIN series s ON s.id = p.series_id WHERE s.key = :t ORDER BY p.step"),
            {"t": TIMESTAMP_KEY}).all() == [(1, 1000.0), (4, 1000.05)]


def test_version_bumps_once_per_changing_batch(engine: Engine, project_id: int) -> None:
    store(engine, project_id, [started(seq=0)])
    store(engine, project_id, [metrics(1, {"a": 1}, seq=1)])
    store(engine, project_id, [metrics(1, {"a": 1}, seq=1)])  # nothing new
    store(engine, project_id, [metrics(2, {"a": 1}, seq=2), metrics(3, {"b": 1}, seq=3)])
    assert run_row(engine)["version"] == 3
    with engine.connect() as conn:
        logged = "series_id IN (SELECT id FROM series WHERE key <> '_timestamp')"  # not the step times
        assert conn.execute(text(f"SELECT step, version FROM points WHERE {logged} ORDER BY step")).all() == [
            (1, 2), (2, 3), (3, 3)]


def test_last_values_only_move_forward(engine: Engine, project_id: int) -> None:
    store(engine, project_id, [started(seq=0), metrics(20, {"loss": 1.0}, seq=2)])
    store(engine, project_id, [metrics(10, {"loss": 5.0, "lr": 0.1}, seq=1)])
    row = run_row(engine)
    assert row["last_values"] == {"loss": [20, 1.0], "lr": [10, 0.1]}
    assert row["last_step"] == 20


def test_status_follows_latest_event_in_any_order(engine: Engine, project_id: int) -> None:
    seg0 = started(seq=0, segment="seg_first_1", ts=100.0)
    fin0 = wire("finished", segment="seg_first_1", seq=5, ts=200.0, status="failed", step=50)
    seg1 = started(seq=0, segment="seg_second1", ts=300.0, resume_step=40)
    store(engine, project_id, [seg0])
    store(engine, project_id, [seg1])  # the resume arrives before the failure
    store(engine, project_id, [fin0])
    row = run_row(engine)
    assert row["status"] == "running" and row["finished_at"] is None and row["started_at"] == 100.0
    with engine.connect() as conn:
        segs = conn.execute(text('SELECT uid, "index", start_step, resumed FROM segments ORDER BY "index"')).all()
    assert [tuple(s) for s in segs] == [("seg_first_1", 0, 0, False), ("seg_second1", 1, 40, True)]
    store(engine, project_id, [wire("finished", segment="seg_second1", seq=9, ts=400.0, status="finished")])
    row = run_row(engine)
    assert row["status"] == "finished" and row["finished_at"] == 400.0


def test_rejections_write_nothing(engine: Engine, project_id: int) -> None:
    store(engine, project_id, [started(seq=0)])
    before = snapshot(engine)
    with pytest.raises(UnknownRun) as unknown:
        store(engine, project_id, [metrics(1, {"a": 1}, seq=1), metrics(1, {"a": 1}, run="run_nobody01", seq=1)])
    assert (unknown.value.index, unknown.value.field) == (1, "run")
    with pytest.raises(UnknownRun) as segment:
        store(engine, project_id, [metrics(1, {"a": 1}, segment="seg_nobody01", seq=1)])
    assert segment.value.field == "segment"
    with pytest.raises(ForeignRun) as foreign:
        store(engine, project_id, [started(run="run_other001", project="elsewhere", seq=0)])
    assert foreign.value.field == "project"
    assert snapshot(engine) == before


def test_tokens_are_stored_hashed(engine: Engine) -> None:
    with Session(engine) as session:
        token = create_token(session, "demo", label="ci")
        session.commit()
    with engine.connect() as conn:
        for table in TABLES:
            for row in conn.execute(text(f"SELECT * FROM {table}")):
                assert all(token not in str(v) for v in row), table
        assert conn.execute(text("SELECT count(*) FROM ingest_tokens WHERE token_hash = :h"), {"h": hash_token(token)}).scalar() == 1


# --- property: stored points and rollups equal a brute-force computation ----------------------

RUN_NUMBERS = itertools.count()
SPECIAL = st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0])
VALUE = st.one_of(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), SPECIAL)
POINTS = st.dictionaries(
    st.tuples(st.sampled_from(["loss", "lr", "g/norm"]), st.integers(min_value=0, max_value=5000)),
    VALUE,
    min_size=1,
    max_size=120,
)


def expected_rollups(points: dict[tuple[str, int], float]) -> dict[tuple[str, int, int], tuple[Any, ...]]:
    """(key, level, bucket) -> (min, max, sum, count, nan_count, last, last_step), the slow obvious way."""
    buckets: dict[tuple[str, int, int], list[tuple[int, float]]] = {}
    for (key, step), value in points.items():
        for level in LEVELS:
            buckets.setdefault((key, level, step >> level), []).append((step, value))
    out = {}
    for k, members in buckets.items():
        vals = [v for _, v in members if not math.isnan(v)]
        finite = [v for v in vals if math.isfinite(v)]
        last_step, last = max(members)
        out[k] = (min(vals, default=None), max(vals, default=None), math.fsum(finite), len(finite),
                  len(members) - len(vals), None if math.isnan(last) else last, last_step)
    return out


def same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a == b


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(points=POINTS, data=st.data())
def test_rollups_match_brute_force(engine: Engine, project_id: int, points: dict[tuple[str, int], float], data: Any) -> None:
    run = f"run_{next(RUN_NUMBERS):08d}"
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    # One metrics event per (step, key); some events are sent twice, batches in random order.
    events = [metrics(step, {key: value}, run=run, seq=i + 1) for i, ((key, step), value) in enumerate(points.items())]
    events += rng.sample(events, k=len(events) // 3)
    rng.shuffle(events)
    cuts = sorted(rng.sample(range(1, len(events)), k=min(len(events) - 1, rng.randint(0, 6))))
    batches = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)])]
    batches.append(rng.choice(batches))  # a whole batch redelivered
    store(engine, project_id, [started(run=run, seq=0)])
    for batch in batches:
        store(engine, project_id, batch)

    with engine.connect() as conn:
        stored = {
            (key, step): value
            for key, step, value in conn.execute(
                text("SELECT s.key, p.step, p.value FROM points p JOIN series s ON s.id = p.series_id"
                     " WHERE s.run_id = :r AND s.key <> :t"), {"r": run, "t": TIMESTAMP_KEY}
            )
        }
        rollups = {
            (r.key, r.level, r.bucket): (r.min, r.max, r.sum, r.count, r.nan_count, r.last, r.last_step)
            for r in conn.execute(
                text("SELECT s.key, r.* FROM rollups r JOIN series s ON s.id = r.series_id"
                     " WHERE s.run_id = :r AND s.key <> :t"), {"r": run, "t": TIMESTAMP_KEY}
            )
        }
        series = {k: (c, lo, hi) for k, c, lo, hi in conn.execute(
            text("SELECT key, count, min_step, max_step FROM series WHERE run_id = :r AND key <> :t"),
            {"r": run, "t": TIMESTAMP_KEY})}
    assert stored.keys() == points.keys()
    for k, value in points.items():
        assert same(stored[k], None if math.isnan(value) else value), k
    expected = expected_rollups(points)
    assert rollups.keys() == expected.keys()
    for k, want in expected.items():
        got = rollups[k]
        mn, mx, sm, cnt, nans, last, last_step = got
        assert (same(mn, want[0]), same(mx, want[1]), cnt, nans, same(last, want[5]), last_step) == (True, True, want[3], want[4], True, want[6]), k
        assert math.isclose(sm, want[2], rel_tol=1e-9, abs_tol=1e-6 * max(1.0, sum(abs(v) for v in [want[2]]))), k
    for key in {k for k, _ in points}:
        steps = [s for k, s in points if k == key]
        assert series[key] == (len(steps), min(steps), max(steps))
    row = run_row(engine, run)
    assert row["last_step"] == max(s for _, s in points)
    for key in {k for k, _ in points}:
        step = max(s for k, s in points if k == key)
        v = points[(key, step)]
        assert row["last_values"][key][0] == step
        assert (row["last_values"][key][1] == "NaN") if math.isnan(v) else (row["last_values"][key][1] in (v, "Infinity", "-Infinity"))


def test_system_samples_are_points_only(engine: Engine, project_id: int) -> None:
    """Samples of the SDK's system sampler (runcast.system): stored, but the run's step, last
    values and heartbeat stay the training's (their step is a wall-clock second)."""
    store(engine, project_id, [started(seq=0), metrics(7, {"loss": 0.5}, seq=1)], received_at=1000.0)
    sample = {"system/node0/rank1/cpu/process_percent": 12.5, "system/node0/rank1/memory/process_rss_mb": 300.0}
    result = store(engine, project_id, [metrics(1_780_000_000, sample, seq=2**52 + 2**32)], received_at=2000.0)
    assert result.points_inserted == 2
    row = run_row(engine)
    assert (row["last_step"], row["last_values"], row["heartbeat_at"]) == (7, {"loss": [7, 0.5]}, 1000.0)
    assert row["version"] == 2  # the points are a new version (the stream carries them)
    # In a batch with training events, the training's step and the batch's arrival count.
    store(engine, project_id, [metrics(1_780_000_010, sample, seq=2**52 + 2**32 + 1), metrics(8, {"loss": 0.4}, seq=3)],
          received_at=3000.0)  # fmt: skip
    row = run_row(engine)
    assert (row["last_step"], row["last_values"], row["heartbeat_at"]) == (8, {"loss": [8, 0.4]}, 3000.0)


def test_updates_fold_in_trainer_order_whatever_order_batches_arrive(engine: Engine, project_id: int) -> None:
    """Config and summary updates, metric declarations and tags: any arrival order, and twice, give one state."""
    first = started(seq=0, ts=100.0, config={"lr": 3e-4, "layers": 2}, tags=["sweep", "base"], group="g1",
                    job_type="train", notes="first try")
    updates = [
        wire("update", seq=1, ts=101.0, config={"lr": 1e-4}),
        wire("update", seq=2, ts=102.0, summary={"best": 0.5}, define={"loss": {"x": "tokens", "summary": "min"}}),
        wire("update", seq=3, ts=103.0, config={"lr": 5e-5, "warmup": 10}, summary={"best": 0.7}),
    ]
    resumed = started(segment="seg_bbbbbbbb", seq=0, ts=200.0, config={"lr": 9.9}, tags=["resumed"], group="g2",
                      resume_step=5)
    late = wire("update", segment="seg_bbbbbbbb", seq=1, ts=201.0, config={"layers": 3})
    store(engine, project_id, [first])
    store(engine, project_id, [resumed])
    for batch in ([late], [updates[2]], [updates[0], updates[1]], [updates[2], late]):  # out of order, and twice
        store(engine, project_id, batch)
    row = run_row(engine)
    assert row["config"] == {"lr": 5e-5, "layers": 3, "warmup": 10}  # the resume's own config is not applied
    assert row["summary"] == {"best": 0.7}
    assert row["metric_defs"] == {"loss": {"x": "tokens", "summary": "min"}}
    assert (row["group_name"], row["job_type"], row["notes"]) == ("g1", "train", "first try")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT tag FROM run_tags ORDER BY tag")).scalars().all() == ["base", "resumed",
                                                                                              "sweep"]
        assert conn.execute(text("SELECT count(*) FROM run_updates")).scalar_one() == 4
        assert conn.execute(text("SELECT count(*) FROM events WHERE type = 'update'")).scalar_one() == 0


def test_version_log_stamps_the_store_not_the_arrival(engine: Engine, project_id: int) -> None:
    """committed_at is when the batch is stored (a batch may wait in the inbox): the broadcast delay
    counts from it. Events remember the version that stored them (migration 0012)."""
    import time

    before = time.time()
    store(engine, project_id, [started(seq=0), wire("note", seq=1, text="hi", step=0)], received_at=1000.0)
    store(engine, project_id, [metrics(1, {"a": 1}, seq=2), wire("note", seq=3, text="later", step=1)],
          received_at=1001.0)
    with engine.connect() as conn:
        stamps = conn.execute(text("SELECT version, committed_at FROM run_versions ORDER BY version")).all()
        events = conn.execute(text("SELECT type, version, received_at FROM events ORDER BY id")).all()
    assert [v for v, _ in stamps] == [1, 2] and all(before <= at <= time.time() for _, at in stamps)
    assert events == [("run_started", 1, 1000.0), ("note", 1, 1000.0), ("note", 2, 1001.0)]


def test_sums_near_the_float_range_never_fail_a_batch(engine: Engine, project_id: int) -> None:
    """Values near the float range overflow a bucket's sum (to +inf in one bucket, -inf in the next: NaN
    when merged, which SQLite stores as NULL and PostgreSQL's float arithmetic refuses). The batch is stored all
    the same, in one batch and across batches; the sum saturates at SUM_LIMIT, the other columns stay exact."""
    run = f"run_{next(RUN_NUMBERS):08d}"
    big = 1.7e308
    store(engine, project_id, [started(run=run, seq=0)])
    store(engine, project_id, [metrics(s, {"x": big if s < 8 else -big}, run=run, seq=s + 1) for s in range(16)])
    store(engine, project_id, [metrics(s, {"x": big}, run=run, seq=s + 1) for s in range(16, 20)])
    store(engine, project_id, [metrics(s, {"x": -big}, run=run, seq=s + 1) for s in range(20, 24)])
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM points p JOIN series s ON s.id = p.series_id"
                                 " WHERE s.run_id = :r AND s.key = 'x'"), {"r": run}).scalar_one() == 24
        rows = conn.execute(text("SELECT r.level, r.bucket, r.min, r.max, r.sum, r.count FROM rollups r"
                                 " JOIN series s ON s.id = r.series_id WHERE s.run_id = :r AND s.key = 'x'"
                                 " ORDER BY r.level, r.bucket"), {"r": run}).all()
    first = [r for r in rows if r.level == LEVELS[0]]
    assert [(r.bucket, r.sum, r.count) for r in first] == [(0, SUM_LIMIT, 8), (1, -SUM_LIMIT, 8), (2, 0.0, 8)]
    top = [r for r in rows if r.level == LEVELS[1]]
    assert [(r.min, r.max, r.count) for r in top] == [(-big, big, 24)]
    assert all(-SUM_LIMIT <= r.sum <= SUM_LIMIT for r in rows)
