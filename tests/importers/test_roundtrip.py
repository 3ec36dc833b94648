"""Runcast's own exports: export -> import -> export gives the same bytes but the times, and the
same times to 0.1 s, for JSONL and CSV."""

from __future__ import annotations

import csv
import json
import math
from typing import Any

import pytest
from api.writer import TrainerSim, project_token
from runcast import importers


@pytest.fixture
def source_run(db: Any, hub):
    """A run with three segments (the middle one without points) and values that are hard to carry."""
    hub.token()
    with db.scope() as session:
        _, project_id = project_token(session, "demo")
    sim = TrainerSim(db.scope, project_id, "demo", name="source").start()
    sim.log({
        "train/loss": [(s, 3.0 / (1 + s)) for s in range(1, 1500)] + [(1500, math.nan), (1501, math.inf), (1502, -math.inf)],
        "=HYPERLINK(\"x\")": [(1, 1.0)],  # a name the CSV export guards against spreadsheets
        "-neg": [(2, -0.5)],
        "ü/tiny": [(3, 5e-324), (4, 1.7976931348623157e308), (5, -0.0), (6, 0.1 + 0.2)],
        "lr": [(s, 1e-3) for s in range(1, 1500, 7)],
    })
    sim.resume(1502)
    sim.resume(1400)
    sim.log({"train/loss": [(s, 2.0 - s / 10_000) for s in range(1401, 2000)], "lr": [(2000, 5e-4)]})
    sim.finish()
    return sim.run


def _untimed(export: str, fmt: str) -> tuple[str, dict[tuple[int, int], float]]:
    """The export without its time column, and (segment, step) -> time."""
    rows, times = [], {}
    for line in export.splitlines():
        if fmt == "jsonl":
            row = json.loads(line)
            times[(row["segment"], row["step"])] = row.pop("time")
            rows.append(json.dumps(row))
        else:
            cells = next(csv.reader([line]))
            if cells[0] != "segment":
                times[(int(cells[0]), int(cells[2]))] = float(cells[4])
            rows.append(line.rsplit(",", 1)[0])
    return "\n".join(rows), times


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_import_export_keeps_points_and_times(hub, source_run, tmp_path, fmt):
    exported = hub.export(source_run, fmt)
    path = tmp_path / f"runcast-{source_run}.{fmt}"
    path.write_bytes(exported.encode())

    (plan,) = hub.load([path])

    assert plan.run_id != source_run
    # The same bytes but the times, and each step's time to within the 0.1 s the server keeps it to
    # (ingest/points.py: a batch's first step of a segment keeps its time, so batch edges may differ).
    points, times = _untimed(exported, fmt)
    again, times_again = _untimed(hub.export(plan.run_id, fmt), fmt)
    assert again == points and times_again.keys() == times.keys()
    assert all(times[k] - 0.1 < times_again[k] <= times[k] for k in times)
    assert [s["index"] for s in hub.run(plan.run_id)["segments"]] == [0, 1, 2]
    # and once more: nothing changes
    hub.load([path])
    assert _untimed(hub.export(plan.run_id, fmt), fmt) == (again, times_again)


def test_a_damaged_export_names_the_line(hub, source_run, tmp_path):
    lines = hub.export(source_run, "csv").splitlines(keepends=True)
    lines[7] = lines[7].replace(",", ";", 1).replace(",", ";", 1)
    path = tmp_path / "damaged.csv"
    path.write_text("".join(lines))
    with pytest.raises(importers.ImportFailed, match=r"damaged\.csv:8: expected 5 cells"):
        hub.load([path])
    out_of_order = tmp_path / "shuffled.jsonl"
    rows = hub.export(source_run, "jsonl").splitlines(keepends=True)
    rows[2], rows[3] = rows[3], rows[2]
    out_of_order.write_text("".join(rows))
    with pytest.raises(importers.ImportFailed, match=r"shuffled\.jsonl:4: step \d+ of .* is not after step"):
        hub.load([out_of_order])
    assert [r["id"] for r in hub.runs()] == [source_run]
