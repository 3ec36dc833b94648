"""The JSONL and CSV exports write the bytes the first exporter wrote (``json.dumps`` and ``csv``
row by row, ``reference`` below) for hostile values (NaN, +-Inf, -0.0, subnormals, the largest
float, every magnitude around repr's switch to exponents, random bit patterns), unicode and
formula-like keys, several keys and segments (a resume), times shared by many steps or a time a
step (a slow loop), any page size and a delayed reader; the Parquet export reads back as the same
points."""

from __future__ import annotations

import csv
import io
import json
import math
import random
import struct
from bisect import bisect_right
from dataclasses import replace
from typing import Any

import pyarrow.parquet as pq
import pytest
from runcast_server.metrics.export import export_chunks, series_to_export
from runcast_server.metrics.export_text import csv_text
from runcast_server.reads.values import stored_value
from runcast_server.record.models import Run
from sqlalchemy import text

API = "/api/v1/runs"
KEYS = ("loss", "损失/λ", "🚀 reward", 'q"uote\\back, \u2028', "=1+2,cmd", "-neg", "lr")


def hostile_values(count: int) -> list[float]:
    """Edge floats, the magnitudes around 1e-4 and 1e16, then random bit patterns and magnitudes."""
    edges = [math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324, -5e-324, 2.2250738585072014e-308,
             1.7976931348623157e308, -1.7976931348623157e308, 0.1 + 0.2, 10.00001, 100.00009, 123456.0, 2.0**53]
    edges += [sign * m * 10.0**e for e in range(-9, 24) for m in (1.0, 9.99, 3.0000000000000004) for sign in (1, -1)]
    rnd = random.Random(31)
    while len(edges) < count:
        bits = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
        edges.append(bits if rnd.random() < 0.5 else rnd.choice((1, -1)) * 10.0 ** rnd.uniform(-12, 20))
    return edges[:count]


# Seconds a step: 100 steps share a time point (one per tenth of a second), or each step has its own.
STEP_SECONDS = [pytest.param(0.001, id="shared-times"), pytest.param(1.25, id="a-time-a-step")]


def log_hostile_run(seed: Any, step_seconds: float = 0.001) -> Any:
    """A run of every key in ``KEYS`` (segment 0), resumed at step 300 (segment 1), ``lr`` all
    below 1e-4, a step every ``step_seconds``."""
    run = seed.run(name="hostile").start(ts=1000.0)
    values = hostile_values(400)

    def send(steps: range, t0: float) -> None:
        events = []
        for s in steps:
            row = {k: values[(s * 7 + i) % len(values)] for i, k in enumerate(KEYS[:-1]) if (s + i) % 3}
            row["lr"] = 3e-5 * (1 + s % 11) / 7
            events.append(run.event("metrics", step=s, values=row, ts=t0 + s * step_seconds))
        run.send(events)

    send(range(0, 400), 1000.0)
    run.resume(300, ts=5000.0)
    send(range(300, 700), 5000.0)
    return run


def reference(db: Any, run_id: str, fmt: str, upto: int | None = None) -> bytes:
    """The export as the first exporter wrote it: one ``json.dumps``/``csv`` row per point, each step's
    time the last ``_timestamp`` point at or before it (all points of versions up to ``upto``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if fmt == "csv":
        writer.writerow(("segment", "key", "step", "value", "time"))
    due = "" if upto is None else f" AND version <= {upto}"
    with db.scope() as session:
        refs = series_to_export(session, session.get(Run, run_id), None)
        for ref in refs:
            points = session.execute(text(f"SELECT step, value FROM points WHERE series_id = {ref.id}{due} ORDER BY step"))
            times = [] if ref.times is None else session.execute(
                text(f"SELECT step, value FROM points WHERE series_id = {ref.times}{due} ORDER BY step")).all()
            for step, value in points:
                i = bisect_right([s for s, _ in times], step)
                at = float(times[i - 1][1]) if i else None
                if fmt == "jsonl":
                    out.write(json.dumps({"segment": ref.segment, "key": ref.key, "step": step, "value": stored_value(value),
                                          "time": at}, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n")
                else:
                    v = stored_value(value)
                    writer.writerow((ref.segment, csv_text(ref.key), step, v if isinstance(v, str) else repr(v),
                                     "" if at is None else repr(at)))
    return out.getvalue().encode()


@pytest.mark.parametrize("step_seconds", STEP_SECONDS)
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_the_export_bytes_are_the_first_exporters(client, seed, db, fmt, step_seconds):
    run = log_hostile_run(seed, step_seconds)
    expected = reference(db, run.run, fmt)
    assert expected.count(b"\n") == 800 * 5 + (fmt == "csv")  # 400 steps a segment, 5 keys a step
    assert client.get(f"{API}/{run.run}/export", params={"format": fmt}).content == expected
    with db.scope() as session:
        refs = series_to_export(session, session.get(Run, run.run), None)
    for page_rows in (1, 7, 100):  # pages cut inside runs of shared times and at their edges
        assert b"".join(export_chunks(db, refs, fmt, page_rows=page_rows)) == expected, page_rows


@pytest.mark.parametrize("step_seconds", STEP_SECONDS)
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_delayed_readers_bytes_are_the_first_exporters(db, seed, fmt, step_seconds):
    run = log_hostile_run(seed, step_seconds)
    with db.scope() as session:
        versions = [v for (v,) in session.execute(text("SELECT DISTINCT version FROM points ORDER BY version"))]
        upto = versions[0]  # [segment 0's batch, segment 1's]: the resumed segment not yet due
        refs = [replace(r, upto=upto, times_upto=upto if r.times is not None else None)
                for r in series_to_export(session, session.get(Run, run.run), None)]
    expected = reference(db, run.run, fmt, upto)
    assert 0 < len(expected) < len(reference(db, run.run, fmt))
    assert b"".join(export_chunks(db, refs, fmt, page_rows=50)) == expected


def test_random_floats_are_written_as_repr_writes_them(client, seed, db):
    run = seed.run(name="floats").start(ts=1000.0)
    # no sum of the series may meet both infinities (NaN; the rollups refuse it): below 1e300
    values = [v for v in hostile_values(20_000) if not abs(v) >= 1e300]
    run.send([run.event("metrics", step=s, values={"x": v}, ts=1000.0) for s, v in enumerate(values)])
    lines = client.get(f"{API}/{run.run}/export", params={"key": "x"}).content.splitlines()
    assert [json.loads(line)["value"] for line in lines] == [stored_value(v) for v in values]
    assert client.get(f"{API}/{run.run}/export", params={"key": "x"}).content == reference(db, run.run, "jsonl")


@pytest.mark.parametrize("step_seconds", STEP_SECONDS)
def test_the_parquet_export_reads_back_as_the_jsonl_points(client, seed, step_seconds):
    run = log_hostile_run(seed, step_seconds)
    # bytes split at "\n" only: str.splitlines would also split the key at its U+2028
    lines = [json.loads(line) for line in client.get(f"{API}/{run.run}/export").content.splitlines()]
    table = pq.read_table(io.BytesIO(client.get(f"{API}/{run.run}/export", params={"format": "parquet"}).content))
    assert table.column_names == ["segment", "key", "step", "value", "time"]
    got = [(r["segment"], r["key"], r["step"], stored_value(r["value"]), r["time"]) for r in table.to_pylist()]
    assert got == [(r["segment"], r["key"], r["step"], r["value"], r["time"]) for r in lines]
