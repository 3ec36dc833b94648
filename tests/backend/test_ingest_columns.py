"""A dense series sent as columns (``metrics_columns``, runcast.wire.columns) is stored exactly as
the same events sent one by one: points, step times, rollups, series and the run's state, on
SQLite and PostgreSQL; a columnar batch sent again adds nothing."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from runcast.wire.columns import MIN_COLUMN_ROWS, encode_columns, expand_columns
from runcast.wire.events import validate_batch
from runcast.wire.limits import TIMESTAMP_KEY
from runcast_server.ingest.store import store_batch
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from backend.helpers import counts, metrics, started, wire


def store(engine: Engine, project_id: int, events: list[dict[str, Any]]) -> Any:
    with Session(engine) as session:
        result = store_batch(session, project_id, validate_batch({"v": 1, "events": events}), received_at=1000.0)
        session.commit()
    return result


def series(seed: int, run: str) -> list[dict[str, Any]]:
    """Metrics events with repeated steps, keys logged now and then, NaN and +-Inf, times close and far
    apart (thinning), steps out of order, and a heartbeat or a note between them."""
    rng = random.Random(seed)
    keys = ["loss", "lr", "eval/acc", "grad/norm"][: 1 + seed % 4]
    out: list[dict[str, Any]] = []
    step, ts = rng.randrange(0, 1000), 1_700_000_000.0
    for i in range(rng.randrange(300, 900)):
        step = step + 1 if rng.random() < 0.85 else max(0, step + rng.randrange(-20, 40))
        ts += rng.choice([0.001, 0.02, 0.2, 3.0])
        values: dict[str, Any] = {}
        for k in keys:
            if k == keys[0] or rng.random() < 0.4:
                r = rng.random()
                values[k] = "NaN" if r < 0.03 else "Infinity" if r < 0.05 else "-Infinity" if r < 0.06 else \
                    rng.uniform(-5, 5) if r < 0.9 else rng.randrange(-3, 4)
        out.append(metrics(step, values, run=run, seq=i + 1, ts=ts))
        if rng.random() < 0.02:
            out.append(wire("note", run=run, seq=10_000 + i, ts=ts, text="hi", step=step) if rng.random() < 0.5
                       else wire("heartbeat", run=run, seq=10_000 + i, ts=ts, step=step))
    return out


def snapshot(engine: Engine, run: str) -> dict[str, Any]:
    """Every stored row of the run that the metrics make, by key and step (ids left out)."""
    with engine.connect() as conn:
        q = lambda sql: conn.execute(text(sql), {"r": run}).all()  # noqa: E731
        return {
            "points": sorted(q("SELECT s.key, p.step, p.value FROM points p JOIN series s ON s.id = p.series_id "
                               "WHERE s.run_id = :r")),
            "rollups": sorted(q("SELECT s.key, r.level, r.bucket, r.min, r.max, r.sum, r.count, r.nan_count, r.last, "
                                "r.last_step FROM rollups r JOIN series s ON s.id = r.series_id WHERE s.run_id = :r")),
            "series": sorted(q("SELECT key, count, min_step, max_step FROM series WHERE run_id = :r")),
            "run": q("SELECT last_step, last_values, status, heartbeat_at FROM runs WHERE id = :r"),
        }


def same_rows(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, sums equal to rounding (the same floats added in another order)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_rows(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_rows(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return bool(a == b)


@pytest.mark.parametrize("seed", range(6))
def test_columns_store_exactly_what_events_store(engine: Engine, project_id: int, seed: int) -> None:
    rng = random.Random(seed)
    cuts: list[int] | None = None
    for run, as_columns in (("run_events_a", False), ("run_columns", True)):
        events = series(seed, run)
        if cuts is None:
            cuts = sorted({0, len(events), *rng.sample(range(1, len(events)), 4)})
        store(engine, project_id, [started(run=run, seq=0, ts=1_699_999_999.0)])
        batches = [events[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
        for batch in batches:
            body = encode_columns(batch) if as_columns else batch
            if as_columns:
                assert any(e["type"] == "metrics_columns" for e in body) == (len(batch) >= MIN_COLUMN_ROWS)
                rows = [(e["step"], e["ts"], e["values"]) for e in expand_columns(body) if e["type"] == "metrics"]
                assert rows == [(e["step"], e["ts"], e["values"]) for e in batch if e["type"] == "metrics"]
            store(engine, project_id, body)
        # The same batch again (a retry, a spool replay): nothing changes.
        before = counts(engine)
        store(engine, project_id, encode_columns(batches[1]) if as_columns else batches[1])
        assert counts(engine) == before
    a, b = snapshot(engine, "run_events_a"), snapshot(engine, "run_columns")
    assert a["points"] and any(k == TIMESTAMP_KEY for k, _, _ in a["points"])
    for part in ("points", "rollups", "series", "run"):
        assert same_rows(a[part], b[part]), part


def test_a_columnar_batch_mixed_with_events_of_its_steps_keeps_the_first(engine: Engine, project_id: int) -> None:
    """Events of the same steps before and after a columnar event: the first occurrence wins, as per event."""
    for run, form in (("run_mixed_ev", False), ("run_mixed_co", True)):
        store(engine, project_id, [started(run=run, seq=0, ts=1.0)])
        head = [metrics(s, {"loss": 100.0 + s}, run=run, seq=s, ts=10.0 + s) for s in (3, 7)]
        dense = [metrics(s, {"loss": float(s), "acc": 0.5}, run=run, seq=10 + s, ts=20.0 + s / 100) for s in range(40)]
        tail = [metrics(s, {"loss": -1.0, "acc": -1.0}, run=run, seq=100 + s, ts=30.0) for s in (5, 50)]
        store(engine, project_id, [*head, *(encode_columns(dense) if form else dense), *tail])
    assert same_rows(snapshot(engine, "run_mixed_ev"), snapshot(engine, "run_mixed_co"))


@pytest.mark.parametrize("seed", range(4))
def test_the_detectors_read_the_same_points_from_either_form(seed: int) -> None:
    """``alerts.engine.watched_columns`` gives the detectors the same steps and values of each key, in the same order."""
    from runcast_server.alerts.engine import watched_columns

    events = series(seed, "run_detector")
    segments = {("run_detector", "seg_aaaaaaaa"): 1}
    watched = {"run_detector": {"loss", "eval/acc", "grad/norm"} if seed % 2 else {"loss"}}
    per_event = watched_columns(validate_batch({"v": 1, "events": events}), segments, watched)
    columnar = watched_columns(validate_batch({"v": 1, "events": encode_columns(events)}), segments, watched)
    assert per_event and same_rows(per_event, columnar)
