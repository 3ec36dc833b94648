"""The query client's history rows from a long points Table, every path: keys at the same steps
(columns as they are) or not (aligned on the union), several segments, chunks with their own
dictionaries, nothing; the DataFrame and the rows agree."""

from __future__ import annotations

import math

import pyarrow as pa
from runcast.query import history

from query.world import same_rows


def _table(rows: list[tuple[int, str, int, float]], dictionary: bool = False) -> pa.Table:
    seg, key, step, value = zip(*rows)
    keys = pa.array(key).dictionary_encode() if dictionary else pa.array(key)
    return pa.table({"segment": pa.array(seg, pa.int32()), "key": keys, "step": pa.array(step, pa.int64()),
                     "value": pa.array(value, pa.float64())})


def test_keys_at_the_same_steps_become_columns_as_they_are() -> None:
    points = [(0, "a", s, float(s)) for s in range(3)] + [(0, "b", s, -float(s)) for s in range(3)]
    points += [(1, "a", 1, math.inf), (1, "b", 1, math.nan)]
    want = [{"_segment": 0, "_step": s, "a": float(s), "b": -float(s)} for s in range(3)]
    want.append({"_segment": 1, "_step": 1, "a": math.inf, "b": math.nan})
    for table in (_table(points), _table(points, dictionary=True)):
        assert same_rows(history.rows_of_table(table), want)
        assert same_rows(history.frame_of_table(table).to_dict("records"), want)


def test_keys_at_other_steps_are_aligned_on_the_union() -> None:
    points = [(0, "a", 0, 1.0), (0, "a", 2, 2.0), (0, "b", 1, 3.0), (1, "a", 0, 4.0)]
    want = [{"_segment": 0, "_step": 0, "a": 1.0}, {"_segment": 0, "_step": 1, "b": 3.0},
            {"_segment": 0, "_step": 2, "a": 2.0}, {"_segment": 1, "_step": 0, "a": 4.0}]
    assert same_rows(history.rows_of_table(_table(points)), want)
    frame = history.frame_of_table(_table(points))
    assert list(frame.columns) == ["_segment", "_step", "a", "b"]
    assert [r["_step"] for r in frame.to_dict("records")] == [0, 1, 2, 0]
    assert math.isnan(frame["b"][0]) and frame["b"][1] == 3.0 and frame["a"][3] == 4.0


def test_per_key_exports_concatenated_with_their_own_dictionaries() -> None:
    first = _table([(0, "b", 0, 1.0), (1, "b", 5, 2.0)], dictionary=True)
    second = _table([(0, "a", 0, 3.0), (1, "a", 5, 4.0)], dictionary=True)
    table = pa.concat_tables([first, second]).unify_dictionaries()
    want = [{"_segment": 0, "_step": 0, "a": 3.0, "b": 1.0}, {"_segment": 1, "_step": 5, "a": 4.0, "b": 2.0}]
    assert same_rows(history.rows_of_table(table), want)
    assert same_rows(history.frame_of_table(table)[["_segment", "_step", "a", "b"]].to_dict("records"), want)


def test_no_points() -> None:
    empty = _table([(0, "a", 0, 1.0)]).slice(0, 0)
    assert history.rows_of_table(empty) == []
    assert list(history.frame_of_table(empty).columns) == ["_segment", "_step"]


def test_samples_spread_evenly_first_and_last_kept() -> None:
    assert history.spaced(10, None) is None and history.spaced(10, 20) is None
    assert history.spaced(10, 1) == [9]
    assert history.spaced(11, 3) == [0, 5, 10]


def _timed(points: list[tuple[int, str, int, float, float | None]]) -> pa.Table:
    table = _table([p[:4] for p in points], dictionary=True)
    return table.append_column("time", pa.array([p[4] for p in points], pa.float64()))


def test_other_columns_of_the_export_are_kept_once_per_row() -> None:
    """A column beyond segment, key, step and value (the step's wall time) becomes ``_time``: the
    first key's value that has one, whether the keys share their steps or not."""
    same = _timed([(0, "a", 0, 1.0, 10.0), (0, "a", 1, 2.0, 11.0), (0, "b", 0, 3.0, 10.0), (0, "b", 1, 4.0, None)])
    want = [{"_segment": 0, "_step": 0, "_time": 10.0, "a": 1.0, "b": 3.0},
            {"_segment": 0, "_step": 1, "_time": 11.0, "a": 2.0, "b": 4.0}]
    assert same_rows(history.rows_of_table(same), want)
    frame = history.frame_of_table(same)
    assert list(frame.columns) == ["_segment", "_step", "_time", "a", "b"]
    assert same_rows(frame.to_dict("records"), want)
    apart = _timed([(0, "a", 0, 1.0, None), (0, "b", 0, 5.0, 10.0), (0, "b", 2, 6.0, 12.0), (1, "a", 1, 7.0, 20.0)])
    want = [{"_segment": 0, "_step": 0, "_time": 10.0, "a": 1.0, "b": 5.0},
            {"_segment": 0, "_step": 2, "_time": 12.0, "b": 6.0},
            {"_segment": 1, "_step": 1, "_time": 20.0, "a": 7.0}]
    assert same_rows(history.rows_of_table(apart), want)
    frame = history.frame_of_table(apart)
    assert list(frame.columns) == ["_segment", "_step", "_time", "a", "b"]
    assert frame["_time"].tolist() == [10.0, 12.0, 20.0] and frame["_step"].dtype == "int64"
    assert frame["a"].isna().tolist() == [False, True, False]
    jsonl = [(0, "a", 0, 1.0, {"time": None}), (0, "b", 0, 5.0, {"time": 10.0}), (0, "b", 2, 6.0, {"time": 12.0}),
             (1, "a", 1, 7.0, {"time": 20.0})]
    assert same_rows(history.rows_of(jsonl), want)
