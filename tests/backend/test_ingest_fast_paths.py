"""The write path's shortcuts give exactly what the general path gives.

On PostgreSQL ``store_batch`` COPYs the points of a batch whose steps all lie past
their series' highest stored step, COPYs the rollup rows of buckets past it, and
checks a batch without run_started on the rows it locks. These tests feed the same
points in order (shortcuts taken), shuffled, with gaps filled later and with
redeliveries (general path), and compare points, rollups and series with a
brute-force computation; and they check that the shortcut's checks reject what
``check_batch`` rejects.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from runcast.wire.events import validate_event
from runcast.wire.limits import TIMESTAMP_KEY
from runcast_server.core.auth import get_or_create_project
from runcast_server.ingest.results import ForeignRun, UnknownRun
from runcast_server.ingest.store import store_batch
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from backend.helpers import counts, metrics, started
from backend.test_store_batch import expected_rollups, same


def store(engine: Engine, project_id: int, events: list[dict[str, Any]]) -> Any:
    with Session(engine) as session:
        result = store_batch(session, project_id, [validate_event(e) for e in events], received_at=1000.0)
        session.commit()
    return result


def value(key: str, step: int) -> float:
    if step % 97 == 5:
        return math.nan
    if step % 89 == 3:
        return math.inf if key == "loss" else -math.inf
    return math.sin(step * 0.1) * (1 + len(key)) + (40.0 if step % 211 == 0 else 0.0)


def stored_state(engine: Engine, run: str) -> tuple[dict[Any, Any], dict[Any, Any], dict[Any, Any]]:
    with engine.connect() as conn:
        points = {
            (k, s): v
            for k, s, v in conn.execute(
                text("SELECT s.key, p.step, p.value FROM points p JOIN series s ON s.id = p.series_id"
                     " WHERE s.run_id = :r AND s.key <> :t"),
                {"r": run, "t": TIMESTAMP_KEY},
            )
        }
        rollups = {
            (r.key, r.level, r.bucket): (r.min, r.max, r.sum, r.count, r.nan_count, r.last, r.last_step)
            for r in conn.execute(
                text("SELECT s.key, r.* FROM rollups r JOIN series s ON s.id = r.series_id"
                     " WHERE s.run_id = :r AND s.key <> :t"),
                {"r": run, "t": TIMESTAMP_KEY},
            )
        }
        series = {
            k: (c, lo, hi)
            for k, c, lo, hi in conn.execute(text("SELECT key, count, min_step, max_step FROM series WHERE run_id = :r AND key <> :t"),
                                           {"r": run, "t": TIMESTAMP_KEY})
        }
    return points, rollups, series


def check_against_brute_force(engine: Engine, run: str, want: dict[tuple[str, int], float]) -> None:
    points, rollups, series = stored_state(engine, run)
    assert points.keys() == want.keys()
    for k, v in want.items():
        assert same(points[k], None if math.isnan(v) else v), k
    expected = expected_rollups(want)
    assert rollups.keys() == expected.keys()
    for k, exp in expected.items():
        mn, mx, sm, cnt, nans, last, last_step = rollups[k]
        assert (same(mn, exp[0]), same(mx, exp[1]), cnt, nans, same(last, exp[5]), last_step) == (
            True, True, exp[3], exp[4], True, exp[6]
        ), k
        assert math.isclose(sm, exp[2], rel_tol=1e-9, abs_tol=1e-9), k
    for key in {k for k, _ in want}:
        steps = [s for k, s in want if k == key]
        assert series[key] == (len(steps), min(steps), max(steps)), key


@pytest.mark.parametrize("order", ["in order", "shuffled", "gaps filled later"])
def test_batches_in_any_order_match_brute_force(engine: Engine, project_id: int, order: str) -> None:
    run = f"run_fast_{order.replace(' ', '_')}"
    keys = ["loss", "lr", "grad/norm"]
    steps = list(range(0, 1500, 1)) + list(range(1500, 70_000, 37))  # dense, then sparse (crosses many buckets)
    rng = random.Random(7)
    if order == "shuffled":
        rng.shuffle(steps)
    elif order == "gaps filled later":
        steps = steps[::2] + steps[1::2]  # the second half lands below each series' highest stored step
    events = [metrics(step, {k: value(k, step) for k in keys}, run=run, seq=i + 1) for i, step in enumerate(steps)]
    store(engine, project_id, [started(run=run, seq=0)])
    # Batch edges that cut through buckets of every level.
    edges = sorted({0, len(events), *rng.sample(range(1, len(events)), 25)})
    batches = [events[a:b] for a, b in zip(edges, edges[1:])]
    for batch in batches:
        store(engine, project_id, batch)
    store(engine, project_id, batches[len(batches) // 2])  # a redelivered batch changes nothing
    one_key_late = [metrics(70_001, {"loss": 1.5}, run=run, seq=len(events) + 1)]
    store(engine, project_id, one_key_late)  # one series moves on alone
    want = {(k, s): value(k, s) for s in steps for k in keys}
    want[("loss", 70_001)] = 1.5
    check_against_brute_force(engine, run, want)


def test_checks_on_locked_rows_reject_like_check_batch(engine: Engine, project_id: int) -> None:
    store(engine, project_id, [started(run="run_mine0001", segment="seg_mine0001", seq=0)])
    with Session(engine) as session:
        other = get_or_create_project(session, "other").id
        session.commit()
    before = counts(engine)
    cases = [
        (other, [metrics(1, {"a": 1.0}, run="run_mine0001", segment="seg_mine0001", seq=1)], ForeignRun, "run", 0),
        (project_id, [metrics(1, {"a": 1.0}, run="run_mine0001", segment="seg_mine0001", seq=1),
                      metrics(1, {"a": 1.0}, run="run_nobody01", segment="seg_nobody01", seq=1)], UnknownRun, "run", 1),
        (project_id, [metrics(1, {"a": 1.0}, run="run_mine0001", segment="seg_unknown1", seq=1)], UnknownRun, "segment", 0),
    ]
    for pid, batch, error, field, index in cases:
        with pytest.raises(error) as exc:
            store(engine, pid, batch)
        assert (exc.value.field, exc.value.index) == (field, index)
    assert counts(engine) == before


def test_a_batch_half_stored_stores_the_other_half_once(engine: Engine, project_id: int) -> None:
    """A resent batch that grew meanwhile (the SDK's retry after a timeout, then more steps): the
    stored half changes nothing, the new half is stored once, rollups and series as if sent once."""
    run = "run_fast_half_stored"
    keys = ["loss", "lr"]
    store(engine, project_id, [started(run=run, seq=0)])
    first = [metrics(step, {k: value(k, step) for k in keys}, run=run, seq=step + 1) for step in range(0, 100)]
    grown = [metrics(step, {k: value(k, step) for k in keys}, run=run, seq=step + 1) for step in range(50, 150)]
    store(engine, project_id, first)
    result = store(engine, project_id, grown)
    assert result.points_inserted == 50 * len(keys)
    store(engine, project_id, grown)  # and once more, whole: nothing new
    check_against_brute_force(engine, run, {(k, s): value(k, s) for s in range(150) for k in keys})


def _deltas_value_by_value(points: list[tuple[int, int, float | None]]) -> dict[tuple[int, int, int], list[Any]]:
    """The first rollup level's deltas, a point at a time (the rule ``rollup_deltas`` must keep)."""
    from runcast_server.metrics.rollups import LEVELS, clamp_sum

    out: dict[tuple[int, int, int], list[Any]] = {}
    for sid, step, value in points:
        finite = value is not None and math.isfinite(value)
        row = out.get((sid, LEVELS[0], step >> LEVELS[0]))
        if row is None:
            out[(sid, LEVELS[0], step >> LEVELS[0])] = [value, value, value if finite else 0.0, int(finite),
                                                         int(value is None), value, step]
            continue
        if value is None:
            row[4] += 1
        else:
            row[0] = value if row[0] is None or value < row[0] else row[0]
            row[1] = value if row[1] is None or value > row[1] else row[1]
            if finite:
                row[2] += value
                row[3] += 1
        row[5], row[6] = value, step
    for row in out.values():
        row[2] = clamp_sum(row[2])
    return out


def _merged_up(rows: dict[tuple[int, int, int], list[Any]], level: int) -> dict[tuple[int, int, int], list[Any]]:
    """The next level's deltas, a lower bucket at a time in step order (the rule for every level above the first)."""
    from runcast_server.metrics.rollups import clamp_sum

    out: dict[tuple[int, int, int], list[Any]] = {}
    for (sid, lower_level, bucket), d in sorted(rows.items()):
        key = (sid, level, bucket >> (level - lower_level))
        row = out.get(key)
        if row is None:
            out[key] = list(d)
            continue
        if d[0] is not None and (row[0] is None or d[0] < row[0]):
            row[0] = d[0]
        if d[1] is not None and (row[1] is None or d[1] > row[1]):
            row[1] = d[1]
        row[2] = clamp_sum(row[2] + d[2])
        row[3] += d[3]
        row[4] += d[4]
        if d[6] > row[6]:
            row[5], row[6] = d[5], d[6]
    return out


@pytest.mark.parametrize("seed", range(40))
def test_a_buckets_values_at_once_give_what_a_value_at_a_time_gives(seed: int) -> None:
    """``rollup_deltas`` reduces each level's buckets as arrays: the same floats as a point at a time
    (the first level) and a lower bucket at a time (each level above), signed zeros, NaN, ±Inf,
    subnormals and sums past the float range included."""
    from runcast_server.metrics.rollups import LEVELS, rollup_deltas

    rng = random.Random(seed)
    pool = [0.0, -0.0, 1.0, -2.5, 1e308, -1e308, 1.7e308, math.inf, -math.inf, None, 5e-324, 0.1, 3.3]
    points = []
    for sid in sorted(rng.sample(range(1, 40), rng.randint(1, 4))):
        for step in sorted(rng.sample(range(rng.choice([16, 200, 10**7])), rng.randint(1, 16))):
            points.append((sid, step, rng.choice(pool) if rng.random() < 0.6 else rng.gauss(0, 10)))
    new, merged = rollup_deltas([p[0] for p in points], [p[1] for p in points], [p[2] for p in points]).rows(
        {p[0]: None for p in points})  # nothing stored before: every row is new
    assert not merged and [row[:3] for row in new] == sorted(row[:3] for row in new)  # in key order
    got = {row[:3]: list(row[3:]) for row in new}
    want = _deltas_value_by_value(points)
    for level in LEVELS:
        if level != LEVELS[0]:
            want = _merged_up(want, level)
        at_level = {k: v for k, v in got.items() if k[1] == level}
        assert at_level.keys() == want.keys(), level
        for k, row in want.items():
            assert [repr(v) for v in at_level[k]] == [repr(v) for v in row], k
