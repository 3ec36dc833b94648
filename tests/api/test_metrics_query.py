"""The rollup read (``reads.metrics``) against a brute-force computation from the raw points.

Runs on SQLite and, when the PostgreSQL fixtures can start a server, on PostgreSQL.
Data goes in through ``store_batch``, so the rollups read here are the ones ingest wrote.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runcast_server.metrics.queries import plan_level, query_metrics
from runcast_server.record.models import Run
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from api.writer import TrainerSim, encoded, project_token


@dataclass
class Backend:
    engine: Engine
    factory: sessionmaker[Session]
    project_id: int

    @contextmanager
    def open_session(self) -> Iterator[Session]:
        with self.factory() as session, session.begin():
            yield session

    def new_run(self, points: dict[int, float], key: str = "loss") -> str:
        sim = TrainerSim(self.open_session, self.project_id, "metrics")
        sim.start()
        sim.log({key: sorted(points.items())})
        return sim.run

    def query(self, run_id: str, **params: Any) -> dict[str, Any]:
        args = {
            "key": "loss",
            "segment": None,
            "start": None,
            "end": None,
            "max_points": 2000,
        } | params
        with self.factory() as session:
            run = session.get(Run, run_id)
            assert run is not None
            return query_metrics(session, run, **args).model_dump()


@pytest.fixture
def backend(engine: Any) -> Backend:
    factory = sessionmaker(bind=engine, expire_on_commit=False)
    with factory() as session, session.begin():
        _, project_id = project_token(session, "metrics")
    return Backend(engine, factory, project_id)


# --- the brute force ------------------------------------------------------------------------


def brute_force(
    points: dict[int, float], start: int, end: int, max_points: int
) -> dict[str, Any]:
    """What the contract says the answer is, computed from the raw points alone: the raw
    points when they number at most ``max_points`` in the view, else aligned buckets."""
    e = 0
    if sum(1 for s in points if start <= s <= end) > max_points:
        while (end >> e) - (start >> e) + 1 > max_points:
            e += 1
    cols: dict[str, list[Any]] = {
        k: [] for k in ("step", "last_step", "min", "max", "mean", "last", "count")
    }
    if e == 0:
        for step in sorted(s for s in points if start <= s <= end):
            v = encoded(points[step])
            for col, x in zip(cols, (step, step, v, v, v, v, 1), strict=True):
                cols[col].append(x)
        return {"level": 0, **cols}
    buckets: dict[int, list[int]] = {}
    for step in sorted(points):
        if start >> e <= step >> e <= end >> e:
            buckets.setdefault(step >> e, []).append(step)
    for b, steps in sorted(buckets.items()):
        values = [points[s] for s in steps]
        ordered = [v for v in values if not math.isnan(v)]
        finite = [v for v in values if math.isfinite(v)]
        cols["step"].append(b << e)
        cols["last_step"].append(steps[-1])
        cols["min"].append(encoded(min(ordered)) if ordered else None)
        cols["max"].append(encoded(max(ordered)) if ordered else None)
        cols["mean"].append(math.fsum(finite) / len(finite) if finite else None)
        cols["last"].append(encoded(values[-1]))
        cols["count"].append(len(finite))
    return {"level": e, **cols}


def assert_matches(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got["level"] == want["level"]
    assert got["bucket_width"] == 2 ** want["level"]
    (series,) = got["series"]
    for col in ("step", "last_step", "min", "max", "last", "count"):
        assert series[col] == want[col], col
    assert len(series["mean"]) == len(want["mean"])
    for g, w in zip(series["mean"], want["mean"], strict=True):
        if isinstance(w, float) and isinstance(g, float):
            assert g == pytest.approx(w, rel=1e-9, abs=1e-9)
        else:
            assert g == w


# --- tests ------------------------------------------------------------------------------------


def test_plan_level_is_the_smallest_width_that_fits():
    for start, end, max_points in [
        (0, 0, 1),
        (0, 1999, 2000),
        (0, 2000, 2000),
        (7, 8, 1),
        (0, 10**6, 2000),
    ]:
        e = plan_level(start, end, max_points)
        assert (end >> e) - (start >> e) + 1 <= max_points
        assert 2**e >= (end - start) / max_points
        assert e == 0 or (end >> (e - 1)) - (start >> (e - 1)) + 1 > max_points


values = st.one_of(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0]),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    points=st.dictionaries(st.integers(0, 5000), values, min_size=1, max_size=200),
    start=st.none() | st.integers(0, 5200),
    end=st.none() | st.integers(0, 5200),
    max_points=st.integers(1, 300),
)
def test_matches_brute_force(backend, points, start, end, max_points):
    if start is not None and end is not None and end < start:
        start, end = end, start
    run_id = backend.new_run(points)
    lo = start if start is not None else min(points)
    hi = end if end is not None else max(points)
    got = backend.query(run_id, start=start, end=end, max_points=max_points)
    if hi < lo:
        assert got["series"][0]["step"] == []
        return
    want = brute_force(points, lo, hi, max_points)
    assert_matches(got, want)
    assert len(got["series"][0]["step"]) <= max_points


def test_one_step_spike_survives_every_zoom(backend):
    n = 2**14
    points = {s: 1.0 for s in range(n)}
    points[9999] = 100.0
    points[3001] = -50.0
    run_id = backend.new_run(points)
    levels = []
    for max_points in (20_000, 16384, 5000, 2000, 700, 100, 33, 8, 3, 1):
        got = backend.query(run_id, max_points=max_points)
        (series,) = got["series"]
        e = got["level"]
        levels.append(e)
        assert len(series["step"]) <= max_points
        for b, step in enumerate(series["step"]):
            # The spikes are the extremes of exactly the buckets that hold them.
            assert (series["max"][b] == 100.0) == (step <= 9999 < step + 2**e), (
                max_points,
                step,
            )
            assert (series["min"][b] == -50.0) == (step <= 3001 < step + 2**e), (
                max_points,
                step,
            )
        assert_matches(got, brute_force(points, 0, n - 1, max_points))
    assert levels == [0, 0, 2, 4, 5, 8, 9, 11, 13, 14]


def test_a_constant_series_reads_as_its_value_at_every_zoom(backend):
    """A constant (a flat learning rate, a fixed batch size) is that value in every bucket: the mean is
    kept within the bucket's min and max, where the sum over the count rounds past it (0.4 * 128 / 128)."""
    for value in (0.4, 3e-4, 0.1, -7.3):
        run_id = backend.new_run({s: value for s in range(5000)})
        for max_points in (5000, 700, 33, 1):
            (series,) = backend.query(run_id, max_points=max_points)["series"]
            assert set(series["mean"]) == {value} and set(series["min"]) == set(series["max"]) == {value}, (value, max_points)


def test_zoomed_window_matches_brute_force(backend):
    points = {s: math.sin(s / 50) + s / 1000 for s in range(0, 12_000, 3)}
    run_id = backend.new_run(points)
    for start, end, max_points in [
        (1000, 1999, 100),
        (5, 11_000, 2000),
        (4096, 8191, 1),
        (777, 778, 1),
    ]:
        got = backend.query(run_id, start=start, end=end, max_points=max_points)
        assert_matches(got, brute_force(points, start, end, max_points))


def test_nonfinite_values_round_trip(backend):
    points = {
        0: 1.0,
        1: math.nan,
        2: math.inf,
        3: -math.inf,
        4: 3.0,
        8: math.nan,
        9: math.nan,
    }
    run_id = backend.new_run(points)
    raw = backend.query(run_id)["series"][0]
    assert raw["last"] == [1.0, "NaN", "Infinity", "-Infinity", 3.0, "NaN", "NaN"]
    assert raw["min"] == raw["max"] == raw["mean"] == raw["last"]
    merged = backend.query(run_id, max_points=2, start=0, end=15)
    assert merged["level"] == 3
    a, b = (
        {k: v[i] for k, v in merged["series"][0].items() if isinstance(v, list)}
        for i in range(2)
    )
    assert a == {
        "step": 0, "last_step": 4, "min": "-Infinity", "max": "Infinity", "mean": 2.0, "last": 3.0, "count": 2,
    }  # fmt: skip
    assert b == {
        "step": 8,
        "last_step": 9,
        "min": None,
        "max": None,
        "mean": None,
        "last": "NaN",
        "count": 0,
    }


def test_raw_points_when_they_fit_whatever_the_span(backend):
    """A sparse series (an eval every 50 steps) is answered raw when its points fit, at any
    zoom; a dense one in the same span is bucketed. The answer's version is the run's."""
    sparse = {s: 1.0 / (1 + s) for s in range(0, 40_001, 50)}  # 801 points over 40,001 steps
    run_id = backend.new_run(sparse)
    got = backend.query(run_id, max_points=1000)
    assert got["level"] == 0 and got["series"][0]["step"] == sorted(sparse)
    zoomed = backend.query(run_id, start=10_000, end=20_000, max_points=201)
    assert zoomed["level"] == 0 and len(zoomed["series"][0]["step"]) == 201
    tight = backend.query(run_id, start=10_000, end=20_000, max_points=200)
    assert_matches(tight, brute_force(sparse, 10_000, 20_000, 200))
    assert tight["level"] > 0
    with backend.factory() as session:
        run = session.get(Run, run_id)
        assert run is not None and got["version"] == run.version >= 1


def test_answer_and_version_are_one_snapshot_while_batches_commit(backend):
    """Read while another thread commits batches: every answer holds exactly the points of
    the versions up to the one it names, raw or bucketed (no point of a later batch)."""
    import threading

    sim = TrainerSim(backend.open_session, backend.project_id, "metrics")
    sim.start()  # version 1
    per_batch, batches = 7, 60
    sim.log({"loss": [(s, 1.0 + s) for s in range(per_batch)]})  # version 2
    done = threading.Event()

    def write() -> None:
        try:
            for b in range(1, batches):
                steps = range(b * per_batch, (b + 1) * per_batch)
                sim.log({"loss": [(s, 1.0 + s) for s in steps]})
        finally:
            done.set()

    writer = threading.Thread(target=write)
    writer.start()
    answers = 0
    try:
        while not done.is_set() or answers < 4:
            for max_points in (20_000, 4):
                got = backend.query(sim.run, max_points=max_points)
                series = got["series"]
                held = sum(sum(s["count"]) for s in series)
                assert held == per_batch * (got["version"] - 1), (max_points, got["version"], held)
                answers += 1
    finally:
        writer.join()
    assert backend.query(sim.run)["version"] == batches + 1


def test_views_wider_than_the_top_level(backend):
    points = {0: 2.0, 2**40: 5.0, 2**40 + 1: -1.0}
    run_id = backend.new_run(points)
    got = backend.query(run_id, max_points=1)
    assert got["level"] == 41
    assert_matches(got, brute_force(points, 0, 2**40 + 1, 1))
