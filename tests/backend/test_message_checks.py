"""The checks a worker's main process makes on a broker message before Celery decodes or pickles
it (core.message_checks, core.screened_task): depth, size and shape, without recursion; and
the queue entries its Redis transport drops (core.broker_transport)."""

from __future__ import annotations

import base64
import json
import pickle
import sys
import uuid
from typing import Any

import pytest
from celery.utils.serialization import get_pickleable_exception
from kombu.message import Message
from runcast_server.core.broker_transport import Message as TransportMessage
from runcast_server.core.message_checks import (
    JSON,
    MAX_DEPTH,
    Unreadable,
    check_body,
    check_payload,
    check_tree,
    nesting_depth,
)
from runcast_server.core.screened_task import check_message

MB = 1 << 20


def deep_text(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


def task_body(kwargs: bytes, args: bytes = b"[]") -> bytes:
    return b"[" + args + b", " + kwargs + b', {"callbacks": null, "errbacks": null, "chain": null, "chord": null}]'


def legacy_kwargs(config: bytes) -> bytes:
    event = (b'{"v": 1, "type": "run_started", "run": "abcdefgh1", "segment": "abcdefgh2", "seq": 0, "ts": 1.0, '
             b'"project": "p", "name": "n", "config": ' + config + b"}")
    return b'{"events": [' + event + b'], "project_id": null, "token": "rc_x"}'


@pytest.mark.parametrize("levels", [900, 100_000])
def test_a_deep_config_is_refused_without_recursion(levels: int) -> None:
    body = task_body(legacy_kwargs(deep_text(levels)))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # the check recurses not at all: a low limit changes nothing
    try:
        with pytest.raises(Unreadable, match=f"more than {MAX_DEPTH} levels deep"):
            check_body(body, JSON, 32 * MB)
    finally:
        sys.setrecursionlimit(limit)


def test_the_deepest_valid_batch_passes_and_one_level_more_of_message_is_refused() -> None:
    config = deep_text(64)  # runcast.wire.limits.MAX_JSON_DEPTH
    check_body(task_body(legacy_kwargs(config)), JSON, MB)
    assert nesting_depth(task_body(legacy_kwargs(config)), MAX_DEPTH) == 4 + 64
    at_limit = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert nesting_depth(at_limit, MAX_DEPTH) == MAX_DEPTH
    check_body(at_limit, JSON, MB)
    with pytest.raises(Unreadable):
        check_body(b"[" + at_limit + b"]", JSON, MB)


@pytest.mark.parametrize(
    "text, depth",
    [
        (b'["]]]]", {"a": "\\"[[[[", "b": "\\\\"}]', 2),  # brackets in strings, escaped quotes and backslashes
        (b"[[], [[]], {}]", 3),
        (b'{"a": [1, {"b": [{}]}]}', 5),
        (b"1", 0),
        (b"[" + b"[]," * 10_000 + b"[]]", 2),
    ],
)
def test_depth_is_counted_outside_strings(text: bytes, depth: int) -> None:
    assert nesting_depth(text, MAX_DEPTH) == depth
    assert depth == _json_depth(json.loads(text))


def test_interleaved_levels_are_counted_too() -> None:
    text = b"1"
    for _ in range(MAX_DEPTH + 5):
        text = b'[[], {"x": "]"}, ' + text + b"]"
    assert nesting_depth(text, MAX_DEPTH) > MAX_DEPTH


@pytest.mark.parametrize("text", [b"]]]][[[[", b"[[]", b"not json {"])
def test_brackets_that_do_not_balance_are_refused(text: bytes) -> None:
    with pytest.raises(Unreadable, match="balance"):
        check_body(text, JSON, MB)


def test_a_large_message_is_refused_by_its_size_before_anything_else() -> None:
    body = task_body(b'{"contract": 2, "inbox_id": 1, "pad": "' + b"x" * (64 * MB) + b'"}')
    with pytest.raises(Unreadable, match=f"{len(body)} bytes, more than the {32 * MB}"):
        check_body(body, JSON, 32 * MB)


def test_only_json_bodies_are_read() -> None:
    with pytest.raises(Unreadable, match="content type 'application/x-python-serialize'"):
        check_body(pickle.dumps({"contract": 2}), "application/x-python-serialize", MB)


@pytest.mark.parametrize(
    "payload, error",
    [
        ([[], [1, 2], {}], "keyword arguments are list, not an object"),
        ([[], "kwargs", {}], "keyword arguments are str, not an object"),
        ([{}, {}, {}], "arguments are dict, not a list"),
        ([[], {}, []], "options are list, not an object"),
        ({"a": 1}, "not a task message"),
        ([[], {}], "not a task message"),
        ("x", "not a task message"),
        ({"task": "t", "args": [], "kwargs": 3}, "keyword arguments are int"),
    ],
)
def test_a_body_that_is_not_a_task_message_is_refused(payload: Any, error: str) -> None:
    with pytest.raises(Unreadable, match=error):
        check_payload(payload)


def test_task_messages_of_both_protocols_pass() -> None:
    check_payload([[], {"contract": 2, "inbox_id": 1}, {"callbacks": None}])
    check_payload({"task": "runcast.ingest_batch", "id": "x", "args": [], "kwargs": {"contract": 2}})


def test_deep_or_large_headers_are_refused() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = {"a": deep}
    with pytest.raises(Unreadable, match="headers nest more than"):
        check_tree({"task": "t", "x": deep}, "headers")
    with pytest.raises(Unreadable, match="properties hold more than"):
        check_tree({"x": ["y" * 1000] * 2000}, "properties")
    check_tree({"task": "runcast.ingest_batch", "id": str(uuid.uuid4()), "timelimit": [None, None], "stamps": {}},
               "headers")


def message(body: bytes, *, content_type: str = JSON, headers: dict[str, Any] | None = None) -> Message:
    task_id = str(uuid.uuid4())
    return Message(body=body, content_type=content_type, content_encoding="utf-8",
                   headers={"task": "runcast.ingest_batch", "id": task_id, **(headers or {})},
                   properties={"correlation_id": task_id}, accept=["application/json"])


@pytest.mark.parametrize(
    "msg, error",
    [
        (message(task_body(legacy_kwargs(deep_text(900)))), "levels deep"),
        (message(task_body(b"[1, 2]")), "keyword arguments are list"),
        (message(b'[[], {"contract": 2, "inbox_id": "\xff"}, {}]'), "cannot be decoded: DecodeError"),
        (message(b"[[], {}, {}] x"), "cannot be decoded"),
        (message(task_body(b"{}"), headers={"x": json.loads(deep_text(500))}), "headers nest"),
        (message(b"\x80\x04K\x01.", content_type="application/x-python-serialize"), "content type"),
    ],
    ids=["deep-900", "kwargs-list", "bad-utf8", "trailing-garbage", "deep-header", "pickle"],
)
def test_check_message_refuses_what_celery_could_not_decode_or_pickle(msg: Message, error: str) -> None:
    with pytest.raises(Unreadable, match=error):
        check_message(msg, 32 * MB)


def test_what_passes_is_decoded_and_pickled_safely_deep_in_a_stack() -> None:
    """The worker decodes and pickles in its main process far down its event loop's stack."""
    body = task_body(b'{"x": ' + b"[" * (MAX_DEPTH - 3) + b"]" * (MAX_DEPTH - 3) + b"}")
    msg = message(body)
    check_message(msg, MB)

    def down(levels: int) -> bytes:
        return pickle.dumps(msg.payload) if levels == 0 else down(levels - 1)

    assert down(sys.getrecursionlimit() - MAX_DEPTH * 4)


def test_an_exception_holding_a_deep_structure_still_crosses_to_the_parent() -> None:
    """Celery replaces an exception it cannot pickle (trace.handle_failure): a task's failure
    always reaches the main process, whatever its message holds."""
    deep: Any = 1
    for _ in range(100_000):
        deep = {"a": deep}
    sent = get_pickleable_exception(ValueError(deep))
    assert isinstance(pickle.loads(pickle.dumps(sent)), Exception)


def _json_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_json_depth(v) for v in value), default=0)
    return 0


@pytest.mark.parametrize(
    "envelope, error",
    [
        ([1, 2, 3], "not a kombu message \\(an object with properties\\)"),
        ({"body": "", "headers": {"task": "t", "id": "m1"}}, "not a kombu message"),
        ({"body": "!!!notbase64", "content-type": JSON, "headers": {"task": "t", "id": "m1"},
          "properties": {"body_encoding": "base64", "delivery_tag": "d", "delivery_info": {}}},
         "message m1: not a kombu message: Error: Invalid base64"),
        ({"body": "eJwLAQAA", "content-type": JSON, "headers": {"task": "t", "id": "m2", "compression": "application/x-gzip"},
          "properties": {"body_encoding": "base64", "delivery_tag": "d", "delivery_info": {}}},
         "message m2: its body is compressed"),
        ({"body": "W10=", "content-type": JSON, "headers": {"task": "t"}, "properties": {"body_encoding": "base64"}},
         "a message without id: not a kombu message: KeyError"),
    ],
    ids=["list", "no-properties", "bad-base64", "compressed", "no-delivery-tag"],
)
def test_the_transport_refuses_an_entry_that_is_not_a_kombu_message(envelope: Any, error: str) -> None:
    """What kombu's Redis transport would raise in the worker's main process (core.broker_transport)."""
    with pytest.raises(Unreadable, match=error):
        TransportMessage(envelope, channel=_Channel())


class _Channel:
    """What a kombu message asks of its channel while it is built."""

    @staticmethod
    def decode_body(body: str, encoding: str | None) -> bytes:
        return base64.b64decode(body) if encoding == "base64" else body.encode()
