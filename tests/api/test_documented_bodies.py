"""The bodies a route checks itself are documented as that check reads them (issue 23).

For each ingest event type, a subscription's rules between fields, an upload's names and paths:
what the OpenAPI document accepts, the server's own check accepts, and what the check refuses,
the document refuses too (the suite's Schemathesis run fuzzes the same both ways, on a live server).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import jsonschema_rs
import pytest
from jsonschema import Draft202012Validator
from pydantic import Field, TypeAdapter, ValidationError
from runcast.wire.events import EVENT_TYPES, MAX_INT, EventError, validate_event
from runcast.wire.limits import NOT_BLANK
from runcast_server.artifacts.uploads import (
    NAME_PATTERN,
    RELATIVE_PATH_PATTERN,
    Limits,
    UploadRejected,
    check_manifest,
)

ENVELOPE = {"v": 1, "run": "run00001", "segment": "seg00001", "seq": 0, "ts": 1.0}
VALID = {
    "run_started": {"project": "p", "name": "n", "config": {"a": [1, {"b": None}], "c": 1.5}, "code": {}, "env": None,
                    "seed": -5, "resume_step": 3, "visibility": "private", "alerts": {"spike": {"k": 3}},
                    "public_paths": True, "tags": ["a b"], "group": "g", "job_type": "", "notes": " ",
                    "policy": {"metrics": ["train/*"], "code": None, "delay_s": 5}},
    "update": {"define": {"loss": {"x": "tokens", "summary": "min"}}, "summary": None},
    "metrics": {"step": 1, "values": {"loss": "NaN", "lr": 0.1, "n": 3}},
    "checkpoint": {"step": 1, "path": "/x", "size": 10, "sha256": "a" * 64, "metrics": {"val": 1}, "public": False,
                   "status": "pruned"},
    "data_mix": {"step": 0, "weights": {"web": 0.5, "code": 0}},
    "manifest": {"step": None, "version": " ", "manifest": {"x": 1}},
    "note": {"text": "hi"},
    "heartbeat": {"lost": 3},
    "finished": {"status": "failed", "lost": 0, "step": 9},
    "sample": {"step": 3, "key": "samples", "prompt_id": "p 1\u200b", "prompt": "", "output": " x\n",
               "reference": None, "scores": {"bleu": "NaN", "len": 3}, "settings": {"temperature": 0.8}},
    "eval": {"step": 3, "suite": "lm-eval-harness", "task": "arc easy", "metrics": {"acc,none": 0.5},
             "checkpoint": 3, "n": 0, "config": {"shots": 5}, "versions": None},
    "media/image": {"type": "media", "step": 3, "key": "gen/grid", "kind": "image", "blob": "a" * 64,
                    "content_type": "image/jpeg", "width": 1, "height": 65_535, "size": 1, "caption": ""},
    "media/table": {"type": "media", "step": 3, "key": "t", "kind": "table", "columns": ["a", "b"],
                    "rows": [["x", None], [True, -2.5]]},
    "media/histogram": {"type": "media", "step": 3, "key": "h", "kind": "histogram", "edges": [-1e300, 0, 2],
                        "counts": [0, 7.5], "nan": 1, "inf": None},
}
INVALID = [
    ("update", {"config": None}),
    ("note", {"text": "  "}),
    ("metrics", {"step": 1, "values": {}}),
    ("metrics", {"step": 1, "values": {"a\nb": 1}}),
    ("metrics", {"step": 1, "values": {"loss": "nan"}}),
    ("checkpoint", {"step": 1, "path": "/x"}),
    ("checkpoint", {"step": 1, "path": "/x", "size": 1, "metrics": None}),
    ("run_started", {"project": "p", "name": "n", "tags": ["a,b"]}),
    ("run_started", {"project": "p", "name": "a\tb"}),
    ("run_started", {"project": "p", "name": "n", "visibility": None}),
    ("run_started", {"project": "p", "name": "n", "config": {"k": "\x00"}}),
    ("run_started", {"project": "p", "name": "n", "policy": {"metrics": "a,b"}}),
    ("data_mix", {"step": 0, "weights": {"web": -1}}),
    ("finished", {"status": "ok"}),
    ("heartbeat", {"lost": -1}),
    ("manifest", {"version": ""}),
    ("sample", {"step": 1, "key": "s", "prompt_id": " ", "prompt": "", "output": ""}),
    ("sample", {"step": 1, "key": "s", "prompt_id": "a\tb", "prompt": "", "output": ""}),
    ("sample", {"step": 1, "key": "s", "prompt_id": "p", "prompt": "\x00", "output": ""}),
    ("sample", {"step": 1, "key": "s", "prompt_id": "p", "prompt": "", "output": "", "scores": {"a": "nan"}}),
    ("sample", {"step": 1, "key": "s", "prompt_id": "p", "prompt": ""}),
    ("eval", {"step": 1, "suite": "s", "task": "t", "metrics": {}}),
    ("eval", {"step": 1, "suite": "s", "task": "t", "metrics": {"a": 1}, "n": -1}),
    ("eval", {"step": 1, "suite": "s\x85", "task": "t", "metrics": {"a": 1}}),
    ("media", {"step": 1, "key": "k", "kind": "video"}),
    ("media", {"step": 1, "key": "k", "kind": "image", "blob": "A" * 64, "content_type": "image/png", "width": 1,
               "height": 1, "size": 1}),
    ("media", {"step": 1, "key": "k", "kind": "image", "blob": "a" * 64, "content_type": "image/svg+xml",
               "width": 1, "height": 1, "size": 1}),
    ("media", {"step": 1, "key": "k", "kind": "table", "columns": [], "rows": []}),
    ("media", {"step": 1, "key": "k", "kind": "table", "columns": ["a"], "rows": [[{"x": 1}]]}),
    ("media", {"step": 1, "key": "k", "kind": "histogram", "edges": [0], "counts": []}),
    ("media", {"step": 1, "key": "k", "kind": "histogram", "edges": [0, 1], "counts": [-1]}),
]


@pytest.fixture
def doc(client: Any) -> dict[str, Any]:
    return client.get("/openapi.json").json()


def _validator(doc: dict[str, Any], name: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": doc["components"]})


def test_the_document_names_every_event_type(doc: dict[str, Any]) -> None:
    events = doc["components"]["schemas"]["IngestBatch"]["properties"]["events"]["items"]
    assert set(events["discriminator"]["mapping"]) == set(EVENT_TYPES)


@pytest.mark.parametrize("kind", sorted(VALID))
def test_an_event_the_document_accepts_the_server_accepts(doc: dict[str, Any], kind: str) -> None:
    event = {**ENVELOPE, "type": kind, **VALID[kind]}  # "media/<kind>": a media event of that kind
    batch = {"v": 1, "events": [event]}
    assert list(_validator(doc, "IngestBatch").iter_errors(batch)) == []
    validate_event(event)


@pytest.mark.parametrize(("kind", "body"), INVALID)
def test_an_event_the_server_refuses_the_document_refuses(doc: dict[str, Any], kind: str, body: dict[str, Any]) -> None:
    event = {**ENVELOPE, "type": kind, **body}
    with pytest.raises(EventError):
        validate_event(event)
    assert list(_validator(doc, "IngestBatch").iter_errors({"events": [event]})) != []


@pytest.mark.parametrize(("body", "ok"), [
    ({"run": "RUN", "channel": "webhook", "url": "https://1.1.1.1/hook"}, True),
    ({"project": "demo", "channel": "email", "email": "a@example.org"}, True),
    ({"run": "RUN", "project": "demo", "channel": "webhook", "url": "https://1.1.1.1/"}, False),
    ({"channel": "webhook", "url": "https://1.1.1.1/"}, False),
    ({"run": "RUN", "channel": "webhook"}, False),
    ({"run": "RUN", "channel": "webhook", "url": "ftp://1.1.1.1/"}, False),
    ({"project": "demo", "channel": "email", "email": "not-an-address"}, False),
])
def test_a_subscription_s_rules_between_fields(doc: dict[str, Any], client: Any, seed: Any, body: dict[str, Any],
                                               ok: bool) -> None:
    run = seed.run("demo").start().run  # and its project, demo
    if "run" in body:
        body = {**body, "run": run}
    assert (list(_validator(doc, "NewSubscription").iter_errors(body)) == []) is ok
    if not ok:
        assert client.post("/api/v1/subscriptions", json=body).status_code == 422


NAMES = ["a", ".", "..", "...", ".a", " ", "ü", "a%", "a%2", "a%2f", "%zz", "a/b", "a\\b", "a\x00", "a\x7f", "a\x1f", ""]
SHA = "0" * 64
PATHS = ["a/b", "a/.x", "ab:c", "/a", "C:/x", "a//b", "a/./b", "a/../b", "a/b/", "a/..", "a/%41", "a\\b"]


@pytest.mark.parametrize("name", NAMES)
def test_an_upload_name_matches_its_pattern_as_the_server_reads_it(name: str) -> None:
    assert (re.fullmatch(NAME_PATTERN, name) is not None) is _accepted(name, [{"path": "f", "size": 1, "sha256": SHA}])


@pytest.mark.parametrize("path", PATHS)
def test_an_upload_path_matches_its_pattern_as_the_server_reads_it(path: str) -> None:
    assert (re.fullmatch(RELATIVE_PATH_PATTERN, path) is not None) is _accepted("ckpt", [{"path": path, "size": 1,
                                                                                           "sha256": SHA}])



def _accepted(name: str, files: list[dict[str, Any]]) -> bool:
    try:
        check_manifest({"name": name, "kind": "directory", "files": files}, Limits(1 << 20, 1 << 30, 100))
    except UploadRejected:
        return False
    return True


@pytest.mark.parametrize("text", [" ", "\t", "\x1c", "\x85", "\u3000", "\ufeff", "a", " a ", "\x1cb", "\x00a"])
def test_not_blank_reads_alike_in_each_regex_dialect(text: str) -> None:
    """The server strips text with Python; pydantic reads a pattern with Rust's regex, JSON Schema
    (jsonschema_rs, Schemathesis) with ECMA's: NOT_BLANK spells its whitespace out, so all agree."""
    expected = bool(text.strip()) and "\x00" not in text
    assert (re.fullmatch(NOT_BLANK, text) is not None) is expected
    assert _pydantic_matches(NOT_BLANK, text) is expected
    assert jsonschema_rs.validator_for({"type": "string", "pattern": NOT_BLANK}).is_valid(text) is expected


def _pydantic_matches(pattern: str, text: str) -> bool:
    try:
        TypeAdapter(Annotated[str, Field(pattern=pattern)]).validate_python(text)
    except ValidationError:
        return False
    return True


def test_an_upload_file_past_64_bits_is_out_of_range_as_documented_not_over_the_limit() -> None:
    files = [{"path": "f", "size": MAX_INT + 1, "sha256": SHA}]
    with pytest.raises(UploadRejected) as info:
        check_manifest({"name": "c", "kind": "directory", "files": files}, Limits(1 << 20, 1 << 30, 100))
    assert (info.value.status, info.value.field) == (422, "files[0].size")
