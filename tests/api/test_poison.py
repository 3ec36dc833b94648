"""Poison inputs are refused at the door: a 4xx with a JSON body naming the field (and the
event's index for ingest), nothing written, and the next good batch still accepted.

What the worker or the database could not hold: a config nested past the limit (440 levels
used to be stored and then break ``GET /runs/{id}`` for good; 978 and more broke the JSON
parser), a lone surrogate in any text (it used to lose the whole batch after the 202), NUL
characters, integers past their column, and out-of-range integers in every query and path
parameter of every route (found by walking the OpenAPI document, so a new route is covered).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text

S = "\ud800"  # a lone surrogate: not a Unicode scalar value
RUN, SEG = "poisonrun0001", "poisonseg0001"
URL = "/api/v1/ingest"


def started(**fields: Any) -> dict[str, Any]:
    return {"v": 1, "type": "run_started", "run": RUN, "segment": SEG, "seq": 0, "ts": 1.0,
            "project": "demo", "name": "poison", **fields}


def event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "type": kind, "run": RUN, "segment": SEG, "seq": 1, "ts": 1.0, **fields}


def post_raw(client: Any, token: str, body: str | bytes) -> Any:
    return client.post(URL, content=body, headers={"Authorization": f"Bearer {token}",
                                                   "Content-Type": "application/json"})


def post(client: Any, token: str, events: list[dict[str, Any]]) -> Any:
    # ensure_ascii: a lone surrogate travels as the escape "\ud800", as a hostile client sends it
    return post_raw(client, token, json.dumps({"v": 1, "events": events}, ensure_ascii=True))


def stored(db: Any) -> dict[str, int]:
    with db.engine.connect() as conn:
        return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
                for t in ("runs", "segments", "series", "points", "events")}


def nested(depth: int) -> str:
    """A JSON object nested ``depth`` levels (the outer object is level 1)."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


@pytest.fixture
def token(seed: Any) -> str:
    return seed.token("demo")


def assert_refused(res: Any, field: str, index: int | None, status: int = 422) -> None:
    assert res.status_code == status, res.text
    assert res.headers["content-type"].startswith("application/json")
    error = res.json()["error"]
    assert error["message"]
    assert error["field"] == field or error["field"].startswith(field + "."), (field, error)
    if index is not None:
        assert error["index"] == index


@pytest.mark.parametrize("depth", [65, 440, 900, 977, 990, 2000])
def test_deep_config_is_refused_naming_config(db: Any, client, token, depth):
    body = '{"v":1,"events":[' + json.dumps(started())[:-1] + ',"config":' + nested(depth) + "}]}"
    res = post_raw(client, token, body)
    if res.status_code == 400:  # deeper than the JSON parser goes in this thread: refused whole
        assert depth > 900 and res.json()["error"]["field"] == "body"
    else:
        assert_refused(res, "config", 0)
        assert "nested more than 64 levels" in res.json()["error"]["message"]
    assert stored(db)["runs"] == 0


def test_config_at_the_limit_is_stored_and_read_back(client, token, seed):
    body = '{"v":1,"events":[' + json.dumps(started())[:-1] + ',"config":' + nested(64) + "}]}"
    assert post_raw(client, token, body).status_code == 202
    res = client.get(f"/api/v1/runs/{RUN}")
    assert res.status_code == 200
    depth, node = 1, res.json()["config"]
    while node:
        node, depth = node["a"], depth + 1
    assert depth == 64


@pytest.mark.parametrize("depth", [5_000, 1_000_000])
def test_body_nested_past_the_parser_is_400(client, token, depth):
    res = post_raw(client, token, "[" * depth + "]" * depth)
    assert res.status_code in (400, 413), res.text
    assert res.json()["error"]["field"] == "body"


# (events of the batch, field, index of the bad event)
TEXT_CASES = [
    ([started(name=S)], "name", 0),
    ([started(name="a\x00b")], "name", 0),
    ([started(project=S)], "project", 0),
    ([started(config={"k": S})], "config.k", 0),
    ([started(config={S: 1})], "config", 0),
    ([started(config={"deep": [{"x": S}]})], "config.deep", 0),
    ([started(code={"diff": S})], "code.diff", 0),
    ([started(env={"host": S})], "env.host", 0),
    ([started(alerts={"keys": {"loss": [S]}})], "alerts.keys", 0),
    ([started(), event("metrics", step=1, values={S: 1.0})], "values", 1),
    ([started(), event("metrics", step=1, values={"ok": 1.0, "x" + S: 2.0})], "values", 1),
    ([started(), event("checkpoint", step=1, path=S, size=1)], "path", 1),
    ([started(), event("checkpoint", step=1, path="demo/a\x00.pt", size=1)], "path", 1),
    ([started(), event("checkpoint", step=1, path="demo/a.pt", size=1, metrics={S: 1.0})], "metrics", 1),
    ([started(), event("data_mix", step=1, weights={S: 1.0})], "weights", 1),
    ([started(), event("manifest", step=1, version=S, manifest={})], "version", 1),
    ([started(), event("manifest", step=1, version="v1", manifest={"files": [S]})], "manifest.files", 1),
    ([started(), event("manifest", step=1, version="v1", manifest={S: 1})], "manifest", 1),
    ([started(), event("note", text=S)], "text", 1),
    ([started(), event("note", text="before\x00after")], "text", 1),
]


@pytest.mark.parametrize(("events", "field", "index"), TEXT_CASES, ids=[c[1] + f"-{i}" for i, c in enumerate(TEXT_CASES)])
def test_text_that_cannot_be_stored_is_refused(db: Any, client, token, events, field, index):
    assert_refused(post(client, token, events), field, index)
    assert stored(db) == dict.fromkeys(stored(db), 0)
    assert post(client, token, [started(), event("metrics", step=1, values={"loss": 1.0})]).status_code == 202


NUMBER_CASES = [
    ([started(seq=2**53)], "seq", 0),
    ([started(ts=1e300)], "ts", 0),
    ([started(seed=2**63)], "seed", 0),
    ([started(seed=-(2**63) - 1)], "seed", 0),
    ([started(resume_step=2**53)], "resume_step", 0),
    ([started(config={"big": 2**70})], "config.big", 0),
    ([started(), event("metrics", step=2**53, values={"a": 1.0})], "step", 1),
    ([started(), event("metrics", step=-1, values={"a": 1.0})], "step", 1),
    ([started(), event("metrics", step=1, values={"a": 10**400})], "values.a", 1),
    ([started(), event("checkpoint", step=1, path="demo/a.pt", size=2**63)], "size", 1),
    ([started(), event("heartbeat", step=2**64)], "step", 1),
]


@pytest.mark.parametrize(("events", "field", "index"), NUMBER_CASES, ids=[c[1] + f"-{i}" for i, c in enumerate(NUMBER_CASES)])
def test_integers_out_of_range_are_refused(db: Any, client, token, events, field, index):
    assert_refused(post(client, token, events), field, index)
    assert stored(db)["runs"] == 0


def test_non_finite_number_in_a_config_is_refused(client, token):
    # 1e400 parses as infinity, which no JSON column can hold.
    body = '{"v":1,"events":[' + json.dumps(started())[:-1] + ',"config":{"x":1e400}}]}'
    assert_refused(post_raw(client, token, body), "config.x", 0)


# --- query and path parameters of every route -----------------------------------------------------


def _integer_params(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            for param in op.get("parameters", []):
                schema = param.get("schema", {})
                kinds = {schema.get("type")} | {s.get("type") for s in schema.get("anyOf", [])}
                if kinds & {"integer", "number"}:
                    out.append((method, path, param))
    return out


def test_every_numeric_parameter_declares_its_range(client):
    params = _integer_params(client.get("/openapi.json").json())
    assert len(params) >= 20
    for method, path, param in params:
        schema = param["schema"]
        bounded = [s for s in [schema, *schema.get("anyOf", [])] if s.get("type") in ("integer", "number")]
        for s in bounded:
            assert ("minimum" in s or "exclusiveMinimum" in s) and "maximum" in s, (method, path, param["name"])


def _declared(schema: dict[str, Any]) -> tuple[float, float]:
    s = next(x for x in [schema, *schema.get("anyOf", [])] if x.get("type") in ("integer", "number"))
    low = s.get("minimum", s.get("exclusiveMinimum"))
    return low, s["maximum"]


def test_out_of_range_numbers_in_every_query_and_path_parameter(db: Any, client, seed):
    """Every numeric parameter of every GET route: past its declared range (2^31 and 2^63
    included), not a number, or a digit that is not ASCII: 422 naming the parameter; inside
    its range: never a 5xx."""
    sim = seed.run("demo").start()
    sim.log({"loss": [(1, 1.0)]})
    doc = client.get("/openapi.json").json()
    fill = {"run_id": sim.run, "cid": "1", "rid": "1", "subscription_id": "1", "version": "v1",
            "project": "demo", "media_id": "1", "number": "1"}
    from runcast_server.core.auth import create_admin_token

    with db.scope() as session:  # the admin routes check their token before their parameters
        admin = {"Authorization": f"Bearer {create_admin_token(session)}"}
    tried = 0
    for method, path, param in _integer_params(doc):
        if method != "get":
            continue
        low, high = _declared(param["schema"])
        for bad in [2**31, 2**53, 2**63, 2**64, 10**30, int(high) + 1, int(low) - 1, "1e400", "-9" * 30, "²", "x"]:
            params = {"key": "loss", "params": "1e9", "token": "t", "from": "v1", "to": "v2",
                      "from_step": "0", "to_step": "1"}
            url = path
            if param["in"] == "path":
                url = url.replace("{" + param["name"] + "}", str(bad))
            else:
                params[param["name"]] = str(bad)
            for name, value in fill.items():
                url = url.replace("{" + name + "}", value)
            res = client.get(url, params=params, headers=admin if path.startswith("/api/v1/admin/") else None)
            tried += 1
            assert res.status_code < 500, (url, params, res.status_code, res.text)
            assert res.headers["content-type"].startswith(("application/json", "text/csv", "application/x-ndjson",
                                                           "application/atom+xml", "image/svg+xml", "image/png"))
            inside = isinstance(bad, int) and low <= bad <= high
            if not inside:
                assert res.status_code == 422, (url, params, res.text)
                assert res.headers["content-type"].startswith("application/json"), (url, params)
                assert res.json()["error"]["field"] == param["name"], (url, params, res.text)
    assert tried >= 200


@pytest.mark.parametrize(("path", "params", "field"), [
    ("/events", {"after": "9999999999999999999"}, "after"),
    ("/events", {"after": "٣"}, "after"),
    ("/alerts", {"after": "9999999999999999999"}, "after"),
    ("/stream", {"last_event_id": "²"}, "last_event_id"),
    ("", {"cursor": "WzFlNDAwLCJ4Il0"}, "cursor"),  # base64 of [1e400,"x"]
    ("", {"cursor": "WzEwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMCwieCJd"}, "cursor"),  # [10^30, "x"]
])
def test_out_of_range_text_numbers_are_422(client, seed, path, params, field):
    sim = seed.run("demo").start()
    url = "/api/v1/runs" + (f"/{sim.run}{path}" if path else "")
    res = client.get(url, params=params)
    assert res.status_code == 422, res.text
    assert res.json()["error"]["field"] == field
