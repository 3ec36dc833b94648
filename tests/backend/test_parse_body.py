"""``inbox.rows.parse_body`` reads a batch exactly as the standard library's ``json.loads`` would.

orjson parses most bodies; these tests hold it to the standard library's answer on every
input, types included (an integer stays an integer of any size, 1 and 1.0 stay apart).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runcast_server.inbox.rows import parse_body


def _stdlib(body: bytes) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(name)

    return json.loads(body, parse_constant=refuse)


def _same(body: bytes) -> None:
    try:
        expected = repr(_stdlib(body))
    except (ValueError, UnicodeDecodeError, RecursionError):
        with pytest.raises((ValueError, UnicodeDecodeError, RecursionError)):
            parse_body(body)
        return
    assert repr(parse_body(body)) == expected  # repr: 1 != 1.0, -0.0 != 0.0, big integers exact


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(json_values, st.booleans())
def test_any_json_value_reads_as_the_standard_library_reads_it(value: Any, ascii_only: bool) -> None:
    _same(json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("body", [
    b"[18446744073709551615]",  # the largest integer orjson keeps
    b"[18446744073709551616]", b"[-9223372036854775809]", b"[123456789012345678901234567890]",
    b'{"step": 99999999999999999999, "v": 0.00012345678901234567}',
    b'{"sha": "12345678901234567890123"}',
    b"[1234567890123456789.5]", b"[12345678901234567890e2]", b"[1e400]", b"[-1e400]", b"[1.0e-400]",
    b"NaN", b"[Infinity]", b"[-Infinity]", b'{"a": NaN}',
    b'["\\ud800"]', b'"\xed\xa0\x80"', b"\xef\xbb\xbf{}", '{"a": "\u00e9"}'.encode("utf-16"),
    '{"a": 1}'.encode("utf-32"), b"\xff", b"[1,]", b"01", b'"a\nb"', b"", b"[" * 5000 + b"]" * 5000,
    b'{"a": 1, "a": 2}', b"-0.0", b"-0", b"1E+5",
])
def test_edge_cases_read_as_the_standard_library_reads_them(body: bytes) -> None:
    _same(body)


def test_a_constant_is_refused_with_what_to_send_instead() -> None:
    with pytest.raises(ValueError, match="NaN is not JSON; send non-finite numbers as strings"):
        parse_body(b'{"v": 1, "events": [{"values": {"loss": NaN}}]}')


def test_a_usual_batch_is_read_by_orjson_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is taken: values in [1e-4, 1e-3) printed with 17 digits (20 in a row) included."""
    from runcast_server.inbox import rows

    def not_expected(*_: Any, **__: Any) -> Any:
        raise AssertionError("the standard library parsed a usual batch")

    monkeypatch.setattr(rows.json, "loads", not_expected)
    body = json.dumps({"v": 1, "events": [
        {"v": 1, "type": "metrics", "run": "r", "segment": "s", "seq": i, "ts": 1796425298.7661912 + i, "step": i,
         "values": {"loss": 2.0 + i / 3, "lr": 0.00029999999999999997, "tokens": 9223372036854775807}}
        for i in range(50)
    ]}).encode()
    assert parse_body(body)["events"][49]["values"]["lr"] == 0.00029999999999999997
