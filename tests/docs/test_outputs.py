"""The comparison of an example's output with the output its doc shows (tests/docs/outputs.py)."""

from __future__ import annotations

from docs.outputs import json_problems, text_problems


def test_json_is_compared_by_shape() -> None:
    doc = '{"runs": [{"id": "q3VfX0c8kPZ2", "last_values": {"lr": 1}, "bytes": {"total": …}}], "next_cursor": null}'
    same_shape = '{"runs": [{"id": "x", "extra": 1, "last_values": {}, "bytes": {"total": 5}}], "next_cursor": "c"}'
    assert json_problems(doc, same_shape) == []
    assert json_problems(doc, '{"runs": []}') == [".next_cursor: documented, not in the answer (keys: runs)"]
    assert json_problems(doc, '{"runs": [{"id": 1, "last_values": {}, "bytes": 3}], "next_cursor": null}') == [
        ".runs[0].bytes: documented an object, got 3"
    ]
    assert json_problems("{", "{}")[0].startswith("the documented JSON does not parse")


def test_text_is_compared_line_by_line_in_order_numbers_aside() -> None:
    doc = 'retry: 1000\n\nid: 3\nevent: reset\ndata: {"version":3}\n'
    got = 'retry: 1000\n\nid: 41\nevent: reset\ndata: {"version":41,"more":true}\n: keep-alive\n'
    assert text_problems(doc, got) == []
    assert text_problems("event: reset\nretry: 1000", got) == [
        "documented line not in the output (in order): 'retry: 1000'"
    ]
