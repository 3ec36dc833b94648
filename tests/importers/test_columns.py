"""An import sends dense series as columns to a server that takes them (whoami's ``event_types``), and
what it stores is exactly what the same import stores one event per step: points, NaN, gaps, step times."""

from __future__ import annotations

import json
import math
from pathlib import Path

from runcast import importers
from runcast.wire.limits import MAX_BATCH_BYTES

T0 = 1_700_000_000.0


def _log(path: Path, steps: int) -> Path:
    rows = []
    for s in range(steps):
        row: dict[str, object] = {"step": s, "loss": 3.0 / (1 + s) + 0.01 * math.sin(s), "timestamp": T0 + 0.5 * s}
        if s % 10 == 0:
            row["lr"] = 3e-4 * (1 - s / steps)  # a sparse key: null in the other rows of a column
        if s % 500 == 7:
            row["loss"] = float("nan")
        if s % 250 == 0:
            row["val/loss"] = 2.0 - s / steps
        rows.append(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # NaN as JSON's NaN, as Python writes it
    return path


def test_columns_store_exactly_what_events_store(hub, tmp_path):
    log = _log(tmp_path / "dense.jsonl", 4000)
    (events,) = hub.load([log], project="events", limits=importers.Limits())  # one event per step, 1000 a batch
    by_events = hub.sent.bodies
    (columns,) = hub.load([log], project="columns")  # what whoami says: 20,000 a batch, as columns
    by_columns = hub.sent.bodies
    (small,) = hub.load([log], project="small", limits=importers.Limits(5000, 20_000, True))  # halved by bytes
    by_small = hub.sent.bodies

    assert not any(b'"metrics_columns"' in body for body in by_events)
    assert len(by_columns) == 1 and b'"type":"metrics_columns"' in by_columns[0]
    assert len(by_small) > 4 and all(len(body) <= 20_000 for body in by_small)
    assert sum(len(b) for b in by_columns) < sum(len(b) for b in by_events) / 2
    assert MAX_BATCH_BYTES > 20_000

    expected = hub.points(events.run_id)
    assert {k: len(v) for k, v in expected.items()} == {(0, "train/loss"): 4000, (0, "lr"): 400, (0, "val/loss"): 16}
    assert any(math.isnan(v) for _, v in expected[(0, "train/loss")])
    for plan in (columns, small):
        stored = hub.points(plan.run_id)
        assert stored.keys() == expected.keys()
        for key, points in expected.items():  # NaN != NaN: compared by repr
            assert [(s, repr(v)) for s, v in stored[key]] == [(s, repr(v)) for s, v in points], key
        assert hub.times(plan.run_id) == hub.times(events.run_id)
        run, want = hub.run(plan.run_id), hub.run(events.run_id)
        assert (run["last_step"], run["status"], run["started_at"], run["finished_at"]) == (
            want["last_step"], want["status"], want["started_at"], want["finished_at"])
