"""GET /runs as a table, on the values a config can hold: numbers (integer or float) against text,
true and false, null, a missing key, a nested object; and offset pages of a sort with ties."""

from __future__ import annotations

import json

import pytest

API = "/api/v1/runs"


def _f(column, op, value):
    return json.dumps([column, op, value])


def names(body):
    return [r["name"] for r in body["runs"]]


@pytest.fixture
def kinds(seed):
    """One run per kind of value under ``x``, oldest first; ``n`` is every run's index."""
    values = {"int": 64, "float": 64.0, "text": "64", "true": True, "false": False, "null": None,
              "nested": {"d_model": 512}, "list": [64], "neg": -0.5}
    for i, (name, value) in enumerate([*values.items(), ("missing", ...)]):
        config = {"n": i, "model": {"layers": 8}} | ({} if value is ... else {"x": value})
        run = seed.run(name=name).start(config=config, ts=1_000_000 + i)
        run.send([run.event("update", summary={"x": value} if value is not ... else {})])
    return list(values) + ["missing"]


def got(client, *filters, **params):
    return sorted(names(client.get(API, params={"filter": list(filters), "limit": 100, **params}).json()))


@pytest.mark.parametrize("source", ["config", "summary"])
def test_numbers_text_booleans_null_and_missing(client, kinds, source):
    x = f"{source}.x"
    assert got(client, _f(x, "eq", 64)) == ["float", "int"]  # 64 and 64.0: one number
    assert got(client, _f(x, "eq", "64")) == ["text"]  # text never equals a number, nor a number text
    assert got(client, _f(x, "ne", 64)) == ["neg"]  # ne: numbers only; null, missing and text are no number
    assert got(client, _f(x, "ne", "65")) == ["text"]
    assert got(client, _f(x, "ge", -1)) == ["float", "int", "neg"]
    assert got(client, _f(x, "lt", 0)) == ["neg"]
    assert got(client, _f(x, "eq", True)) == ["true"]  # true is not the number 1
    assert got(client, _f(x, "eq", False)) == ["false"]
    assert got(client, _f(x, "ne", True)) == ["false"]
    assert got(client, _f(x, "ne", False)) == ["true"]
    assert got(client, _f(x, "eq", 1)) == [] and got(client, _f(x, "eq", 0)) == []


def test_a_nested_object_is_no_value_and_its_keys_no_columns(client, kinds):
    """A column is a top-level key, whole: ``config.model.layers`` is the key "model.layers"."""
    assert got(client, _f("config.model.layers", "eq", 8)) == []
    assert got(client, _f("config.model", "eq", 8)) == []
    assert got(client, _f("config.model", "ne", "x")) == []
    body = client.get(API, params={"column": ["config.model", "config.x"], "sort": "config.n", "order": "asc",
                                   "limit": 100}).json()
    assert body["runs"][0]["values"] == {"config.model": {"layers": 8}, "config.x": 64}
    assert body["runs"][6]["values"]["config.x"] == {"d_model": 512}
    grouped = client.get(API, params={"group_by": "group", "column": ["config.x", "config.model"]}).json()
    assert grouped["groups"][0]["count"] == len(kinds)
    assert grouped["groups"][0]["aggregates"] == {"config.x": {"min": -0.5, "mean": pytest.approx(127.5 / 3),
                                                               "max": 64.0}}


def test_sort_puts_runs_without_a_number_or_text_last(client, kinds):
    asc = names(client.get(API, params={"sort": "config.x", "order": "asc", "limit": 100}).json())
    desc = names(client.get(API, params={"sort": "config.x", "order": "desc", "limit": 100}).json())
    assert asc[:4] == ["neg", "float", "int", "text"]  # numbers (ties newest first), then text
    assert set(asc[4:]) == set(desc[4:]) == {"true", "false", "null", "nested", "list", "missing"}
    assert desc[:4] in (["text", "float", "int", "neg"], ["float", "int", "neg", "text"])  # dialects order types
    assert sorted(asc) == sorted(kinds)


@pytest.mark.parametrize("sort", ["config.lr", "metric.train/loss", "summary.acc"])
def test_offset_pages_of_a_sort_with_ties_hold_every_run_once(client, seed, sort):
    """Equal values (ties) page in a fixed order (newest first), so offset pages hold each run once."""
    for i in range(23):
        run = seed.run(name=f"t{i:02d}").start(config={"lr": [1e-3, 3e-4, "x", None][i % 4]}, ts=1_000_000 + i // 5)
        run.log({"train/loss": [(1, float(i % 3))]})
        run.send([run.event("update", summary={"acc": i % 2})])
    for order in ("asc", "desc"):
        seen: list[str] = []
        offset: int | None = 0
        while offset is not None:
            body = client.get(API, params={"sort": sort, "order": order, "limit": 4, "offset": offset}).json()
            seen += names(body)
            offset = body["next_offset"]
        assert sorted(seen) == [f"t{i:02d}" for i in range(23)], (sort, order)
        whole = names(client.get(API, params={"sort": sort, "order": order, "limit": 100}).json())
        assert seen == whole


@pytest.mark.parametrize("params", [{"sort": "config.lr", "order": "asc"}, {"sort": "config.lr", "order": "desc"},
                                    {"group_by": "group", "sort": "metric.train/loss", "column": "config.lr"}])
def test_runs_created_while_paging_never_shift_a_page(client, seed, params):
    """Paging by offset with the first page's as_of: runs created meanwhile (ties, the smallest and
    the largest value, in any group) neither repeat a run nor push one off a page."""

    def make(name, lr, group):
        run = seed.run(name=name).start(config={"lr": lr}, group=group)
        run.log({"train/loss": [(1, lr)]})

    for i in range(12):
        make(f"old{i:02d}", [1e-3, 3e-4, 1e-2][i % 3], f"g{i % 2}")
    seen: list[str] = []
    body = client.get(API, params={**params, "limit": 5}).json()
    assert body["as_of"] is not None and body["next_offset"] == 5
    groups = body.get("groups")
    added = 0
    while True:
        seen += names(body)
        for lr in (1e-3, 1e-9, 1.0):  # a tie, the first and the last place
            make(f"new{added:02d}", lr, f"g{added % 3}")
            added += 1
        if body["next_offset"] is None:
            break
        body = client.get(API, params={**params, "limit": 5, "offset": body["next_offset"],
                                       "as_of": body["as_of"]}).json()
        assert body.get("groups") == groups  # the same listing: counts and aggregates too
    assert sorted(seen) == [f"old{i:02d}" for i in range(12)]
    fresh = names(client.get(API, params={**params, "limit": 100}).json())
    assert len(fresh) == 12 + added  # a new first page lists them all
    assert client.get(API, params={**params, "as_of": "x"}).status_code == 422
    assert client.get(API, params={"as_of": 1}).json()["as_of"] is None  # newest first pages by cursor
