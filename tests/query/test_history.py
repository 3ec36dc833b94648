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


def test_each_row_has_its_steps_time_and_the_seconds_since_the_start() -> None:
    """The export's ``time`` column becomes ``_timestamp`` (one per step, whichever key) and
    ``_runtime``; a step without a time has neither, on the rows and the DataFrame alike."""
    points = [(0, "a", 0, 1.0), (0, "a", 1, 2.0), (0, "b", 1, 3.0), (1, "a", 1, 4.0)]
    times = [None, 105.5, 105.5, 200.0]
    table = _table(points).append_column("time", pa.array(times, pa.float64()))
    want = [{"_segment": 0, "_step": 0, "a": 1.0}, {"_segment": 0, "_step": 1, "a": 2.0, "b": 3.0, "_timestamp": 105.5,
            "_runtime": 5.5}, {"_segment": 1, "_step": 1, "a": 4.0, "_timestamp": 200.0, "_runtime": 100.0}]
    assert same_rows(list(history.with_runtime(history.rows_of_table(table), 100.0)), want)
    frame = history.frame_times(history.frame_of_table(table), table, 100.0)
    records = [{k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))} for r in frame.to_dict("records")]
    assert same_rows(records, want)
    # No start known: the seconds since the first step time.
    assert [r.get("_runtime") for r in history.with_runtime(history.rows_of_table(table), None)] == [None, 0.0, 94.5]
    assert history.frame_times(history.frame_of_table(table), table, None)["_runtime"].tolist()[1:] == [0.0, 94.5]
