"""Each step's wall time, stored by the server as the series ``_timestamp`` (raw HTTP, embedded app):
the thinning rule, a resumed segment's own times, a user's ``_timestamp`` refused, the time column
of every export format, and the broadcast delay and withheld metrics holding the times back."""

from __future__ import annotations

import csv
import io
import json
import math
import time
from typing import Any

import pyarrow.parquet as pq
from runcast.wire import events as ev
from runcast_server.metrics.export import SeriesRef, export_chunks
from runcast_server.record.models import Series

from api.test_policy import _put

T0 = 1_700_000_000.0


class TimedTrainer:
    """One run sent over HTTP with the ``ts`` the test picks for each event."""

    def __init__(self, client: Any, token: str, project: str = "team") -> None:
        self.client, self.token, self.project = client, token, project
        self.run, self.segment, self.seq = ev.new_id(), ev.new_id(), 0

    def post(self, events: list[tuple[str, float, dict[str, Any]]]) -> Any:
        batch = []
        for kind, ts, fields in events:
            batch.append({"v": ev.SCHEMA_VERSION, "type": kind, "run": self.run, "segment": self.segment,
                          "seq": self.seq, "ts": ts, **fields})
            self.seq += 1
        return self.client.post("/api/v1/ingest", json={"v": 1, "events": batch},
                                headers={"Authorization": f"Bearer {self.token}"})

    def send(self, events: list[tuple[str, float, dict[str, Any]]]) -> None:
        r = self.post(events)
        assert r.status_code == 202, r.text

    def start(self, ts: float = T0, resume_step: int | None = None) -> TimedTrainer:
        self.send([("run_started", ts, {"project": self.project, "name": "timed", "config": {}, "resume_step": resume_step,
                                        "visibility": "public"})])
        return self

    def steps(self, times: list[tuple[int, float]], keys: tuple[str, ...] = ("loss",)) -> None:
        self.send([("metrics", ts, {"step": step, "values": {k: float(step) for k in keys}}) for step, ts in times])


def expected(times: list[tuple[int, float]]) -> dict[int, float]:
    """The rule, written out: a step's time is kept when it falls in a later tenth of a second
    than the last kept one (in one batch), and a step keeps its first time."""
    kept: dict[int, float] = {}
    last = -1
    for step, ts in times:
        if math.floor(ts * 10) > last and step not in kept:
            kept[step] = ts
            last = math.floor(ts * 10)
    return kept


def stored_times(client: Any, run: str, headers: dict[str, str] | None = None) -> dict[int, dict[int, float]]:
    """segment -> step -> stored ``_timestamp`` (raw points)."""
    r = client.get(f"/api/v1/runs/{run}/metrics", params={"key": ev.TIMESTAMP_KEY, "max_points": 20_000},
                   headers=headers or {})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["level"] == 0
    return {s["segment"]: dict(zip(s["step"], s["last"])) for s in body["series"]}


def test_each_step_has_its_time_thinned_to_tenths_of_a_second(client: Any, seed: Any) -> None:
    t = TimedTrainer(client, seed.token("team")).start()
    # Steps 0-9 a second apart, then a burst: 40 steps in 0.2 s, a repeated step 3 (a later log of it).
    slow = [(s, T0 + s) for s in range(10)]
    burst = [(10 + i, T0 + 10 + i * 0.005) for i in range(40)]
    t.steps(slow[:5])
    t.steps(slow[5:] + [(3, T0 + 9.5)] + burst)
    times = stored_times(client, t.run)
    assert times == {0: {**expected(slow[5:] + [(3, T0 + 9.5)] + burst), **expected(slow[:5])}}  # first write wins
    assert set(times[0]) >= set(range(10)) and len([s for s in times[0] if s >= 10]) == 2  # tenths 10.0, 10.1
    assert times[0][3] == T0 + 3  # the first time a step got stays

    detail = client.get(f"/api/v1/runs/{t.run}").json()
    assert detail["keys"] == ["loss"] and set(detail["last_values"]) == {"loss"}


def test_a_resumed_segment_has_its_own_times(client: Any, seed: Any) -> None:
    t = TimedTrainer(client, seed.token("team")).start()
    t.steps([(s, T0 + s) for s in range(6)])
    t.segment, t.seq = ev.new_id(), 0
    t.start(T0 + 100, resume_step=4)
    t.steps([(s, T0 + 100 + s) for s in range(4, 8)])
    assert stored_times(client, t.run) == {0: {s: T0 + s for s in range(6)}, 1: {s: T0 + 100 + s for s in range(4, 8)}}


def test_a_user_timestamp_key_is_refused_and_nothing_is_stored(client: Any, seed: Any) -> None:
    t = TimedTrainer(client, seed.token("team")).start()
    r = t.post([("metrics", T0 + 1, {"step": 1, "values": {"loss": 1.0}}),
                ("metrics", T0 + 2, {"step": 2, "values": {"loss": 2.0, "_timestamp": 5.0}})])
    assert r.status_code == 422, r.text
    assert "values._timestamp" in r.text
    assert client.get(f"/api/v1/runs/{t.run}/metrics", params={"key": "loss"}).status_code == 404
    assert client.get(f"/api/v1/runs/{t.run}/metrics", params={"key": ev.TIMESTAMP_KEY}).status_code == 404


def test_every_export_row_has_its_step_time(client: Any, seed: Any) -> None:
    t = TimedTrainer(client, seed.token("team")).start()
    burst = [(s, T0 + s * 0.04) for s in range(10)]  # 25 steps/s: times kept at 0, 0.12, 0.2, 0.32
    t.steps(burst, keys=("a", "b"))
    kept = expected(burst)
    assert sorted(kept) == [0, 3, 5, 8]

    def time_of(step: int) -> float:
        return kept[max(s for s in kept if s <= step)]

    want = [(key, s, time_of(s)) for key in ("a", "b") for s in range(10)]
    jsonl = [json.loads(line) for line in client.get(f"/api/v1/runs/{t.run}/export", params={"format": "jsonl"}).text.splitlines()]
    assert [(r["key"], r["step"], r["time"]) for r in jsonl] == want
    rows = list(csv.DictReader(io.StringIO(client.get(f"/api/v1/runs/{t.run}/export", params={"format": "csv"}).text)))
    assert [(r["key"], int(r["step"]), float(r["time"])) for r in rows] == want
    table = pq.read_table(io.BytesIO(client.get(f"/api/v1/runs/{t.run}/export", params={"format": "parquet"}).content))
    assert table.schema.field("time").type.equals("float64")
    assert list(zip(table.column("key").to_pylist(), table.column("step").to_pylist(), table.column("time").to_pylist())) == want
    one = client.get(f"/api/v1/runs/{t.run}/export", params={"format": "jsonl", "key": ev.TIMESTAMP_KEY}).text
    assert [(r["step"], r["value"], r["time"]) for r in map(json.loads, one.splitlines())] == [(s, v, v) for s, v in kept.items()]


def test_delay_and_withheld_metrics_hold_back_the_times(client: Any, seed: Any) -> None:
    token, other = seed.token("team"), seed.token("rivals")
    t = TimedTrainer(client, token).start(time.time())
    team = {"t": t, "run": t.run, "token": token, "other": other}
    assert _put(client, team, {"delay_s": 2.0}).status_code == 200
    now = time.time()
    t.steps([(s, now + s) for s in range(3)])
    time.sleep(2.3)
    t.steps([(s, now + s) for s in range(3, 6)])
    assert set(stored_times(client, t.run, {"Authorization": f"Bearer {token}"})[0]) == set(range(6))
    for headers in ({}, {"Authorization": f"Bearer {other}"}):
        assert set(stored_times(client, t.run, headers)[0]) == {0, 1, 2}
        export = client.get(f"/api/v1/runs/{t.run}/export", params={"format": "jsonl"}, headers=headers).text
        assert {json.loads(line)["step"] for line in export.splitlines()} == {0, 1, 2}

    assert _put(client, team, {"delay_s": 0, "metrics": ["loss"]}).status_code == 200  # the times go with any metric shown
    assert len(stored_times(client, t.run)[0]) == 6
    assert _put(client, team, {"metrics": "none"}).status_code == 200
    assert client.get(f"/api/v1/runs/{t.run}/metrics", params={"key": ev.TIMESTAMP_KEY}).status_code == 404
    assert client.get(f"/api/v1/runs/{t.run}/export", params={"format": "jsonl"}).text == ""
    assert len(stored_times(client, t.run, {"Authorization": f"Bearer {token}"})[0]) == 6


def test_the_parquet_times_hold_across_pages_and_for_a_delayed_reader(db: Any, client: Any, seed: Any) -> None:
    """A Parquet page's first steps take their time from a time point on an earlier page; a delayed
    reader's Parquet has the times its JSONL has. test_manage_postgres.py runs this again on
    PostgreSQL, where the pages and the times are read with ADBC."""
    token = seed.token("team")
    t = TimedTrainer(client, token).start()
    burst = [(s, T0 + s * 0.04) for s in range(40)]  # a time point every third step or so
    t.steps(burst, keys=("a",))
    kept = expected(burst)
    with db.scope() as session:
        ids = dict(session.query(Series.key, Series.id).filter(Series.run_id == t.run))
    ref = SeriesRef(id=ids["a"], segment=0, key="a", times=ids[ev.TIMESTAMP_KEY])
    table = pq.read_table(io.BytesIO(b"".join(export_chunks(db, [ref], "parquet", page_rows=7))))
    assert pq.ParquetFile(io.BytesIO(b"".join(export_chunks(db, [ref], "parquet", page_rows=7)))).metadata.num_row_groups == 6
    assert table.column("time").to_pylist() == [kept[max(k for k in kept if k <= s)] for s in range(40)]

    late = TimedTrainer(client, token).start(time.time())
    assert _put(client, {"t": late, "run": late.run, "token": token}, {"delay_s": 2.0}).status_code == 200
    now = time.time()
    late.steps([(s, now + s) for s in range(3)])
    time.sleep(2.3)
    late.steps([(s, now + s) for s in range(3, 6)])
    for headers in ({}, {"Authorization": f"Bearer {token}"}):
        params = {"format": "parquet"}
        got = pq.read_table(io.BytesIO(client.get(f"/api/v1/runs/{late.run}/export", params=params, headers=headers).content))
        jsonl = client.get(f"/api/v1/runs/{late.run}/export", params={"format": "jsonl"}, headers=headers).text
        want = [(r["step"], r["time"]) for r in map(json.loads, jsonl.splitlines())]
        assert list(zip(got.column("step").to_pylist(), got.column("time").to_pylist())) == want
        assert [s for s, _ in want] == (list(range(6)) if headers else [0, 1, 2])
        assert [at for _, at in want] == [now + s for s in range(6 if headers else 3)]
