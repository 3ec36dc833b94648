"""GET /runs as a table: columns, filters, sort, offset pages, group aggregates, keys; bad input;
what the publication policy and other projects' private runs keep out of filters and sorts."""

from __future__ import annotations

import json

import pytest

API = "/api/v1/runs"
HOSTILE = "<img src=x onerror=alert(1)>"


def _f(column, op, value):
    return json.dumps([column, op, value])


@pytest.fixture
def sweep(seed):
    """Six runs of project demo in two groups, oldest first: lr, optimizer, a summary, a last loss."""
    made = []
    for i, (lr, opt, group) in enumerate([(1e-3, "adam", "g1"), (3e-4, "adam", "g1"), (1e-4, "sgd", "g1"),
                                          (3e-3, "sgd", "g2"), (1e-2, "adam", "g2"), (None, "adam", None)]):
        config = {"optimizer": opt, HOSTILE: "<img src=y onerror=alert(2)>"} | ({} if lr is None else {"lr": lr})
        run = seed.run(name=f"r{i}").start(config=config, group=group, tags=["even"] if i % 2 == 0 else [],
                                           ts=1_000_000 + i)
        run.log({"train/loss": [(10, 5.0 - i)]})
        run.send([run.event("update", summary={"acc": 0.5 + i / 10})])
        made.append(run)
    return made


def names(body):
    return [r["name"] for r in body["runs"]]


def test_columns_sort_and_offset_pages(client, sweep):
    params = {"column": ["config.lr", "config.optimizer", "summary.acc", "metric.train/loss", f"config.{HOSTILE}"],
              "sort": "config.lr", "order": "asc", "limit": 2}
    first = client.get(API, params=params).json()
    assert names(first) == ["r2", "r1"] and first["next_cursor"] is None and first["next_offset"] == 2
    assert first["runs"][0]["values"] == {"config.lr": 1e-4, "config.optimizer": "sgd", "summary.acc": 0.7,
                                          "metric.train/loss": 3.0, f"config.{HOSTILE}": "<img src=y onerror=alert(2)>"}
    rest = names(client.get(API, params={**params, "offset": 2, "limit": 10}).json())
    assert rest == ["r0", "r3", "r4", "r5"]  # r5 has no lr: last either way
    desc = names(client.get(API, params={**params, "order": "desc", "limit": 10}).json())
    assert desc == ["r4", "r3", "r0", "r1", "r2", "r5"]
    assert names(client.get(API, params={"sort": "metric.train/loss", "order": "asc"}).json())[0] == "r5"
    assert names(client.get(API, params={"sort": "config.optimizer", "order": "asc", "limit": 3}).json()) == \
        ["r5", "r4", "r1"]  # text; ties newest first
    assert names(client.get(API, params={"sort": "name", "order": "asc", "limit": 2}).json()) == ["r0", "r1"]


def test_filters_config_tags_group_status_time(client, sweep):
    def got(*filters, **params):
        return sorted(names(client.get(API, params={"filter": list(filters), **params}).json()))

    assert got(_f("config.optimizer", "eq", "adam")) == ["r0", "r1", "r4", "r5"]
    assert got(_f("config.optimizer", "ne", "adam")) == ["r2", "r3"]
    assert got(_f("config.lr", "ge", 1e-3), _f("config.lr", "lt", 1e-2)) == ["r0", "r3"]
    assert got(_f("config.lr", "eq", 3e-4)) == ["r1"]
    assert got(_f("metric.train/loss", "le", 2)) == ["r3", "r4", "r5"]
    assert got(_f("summary.acc", "gt", 0.85)) == ["r4", "r5"]
    assert got(_f(f"config.{HOSTILE}", "eq", "<img src=y onerror=alert(2)>"), tag="even", group="g1") == ["r0", "r2"]
    assert got(_f("started_at", "ge", 1_000_004)) == ["r4", "r5"]
    assert got(_f("created_at", "ge", 1_000_004)) == names(client.get(API).json())[::-1]  # received now
    assert got(_f("config.optimizer", "eq", "adam"), status="running") == ["r0", "r1", "r4", "r5"]
    assert got(_f("config.lr", "eq", "0.001")) == []  # text never equals a number


def test_group_by_with_aggregates(client, sweep):
    body = client.get(API, params={"group_by": "group", "column": ["config.lr", "metric.train/loss", "config.optimizer"],
                                   "limit": 3}).json()
    assert names(body) == ["r2", "r1", "r0"] and body["next_offset"] == 3
    groups = {g["group"]: g for g in body["groups"]}
    assert [g["group"] for g in body["groups"]] == ["g1", "g2", None]
    assert groups["g1"]["count"] == 3
    lr = groups["g1"]["aggregates"]["config.lr"]
    assert (lr["min"], lr["max"]) == (1e-4, 1e-3) and lr["mean"] == pytest.approx((1e-3 + 3e-4 + 1e-4) / 3)
    assert groups["g2"]["aggregates"]["metric.train/loss"] == {"min": 1.0, "mean": 1.5, "max": 2.0}
    assert "config.lr" not in groups[None]["aggregates"]  # no number there
    assert "config.optimizer" not in groups["g1"]["aggregates"]  # text: nothing to aggregate
    only = client.get(API, params={"group_by": "group", "filter": _f("config.optimizer", "eq", "sgd")}).json()
    assert [(g["group"], g["count"]) for g in only["groups"]] == [("g1", 1), ("g2", 1)]


def test_keys_of_the_page(client, sweep):
    body = client.get(API, params={"keys": "true"}).json()
    assert body["keys"] == {"config": sorted([HOSTILE, "lr", "optimizer"]), "summary": ["acc"], "metric": ["train/loss"]}
    assert client.get(API).json()["keys"] is None


@pytest.mark.parametrize(("params", "field"), [
    ({"filter": "not json"}, "filter"),
    ({"filter": _f("config.lr", "like", 1)}, "filter"),
    ({"filter": _f("config.lr", "ge", "big")}, "filter"),
    ({"filter": _f("config.lr", "lt", True)}, "filter"),
    ({"filter": json.dumps(["config.lr", "eq"])}, "filter"),
    ({"filter": json.dumps(["config.lr", "eq", [1]])}, "filter"),
    ({"filter": json.dumps(["config.lr", "eq", None])}, "filter"),
    ({"filter": '["config.lr", "ge", NaN]'}, "filter"),
    ({"filter": _f("colour", "eq", "red")}, "filter"),
    ({"filter": _f("name", "ge", 3)}, "filter"),
    ({"filter": _f("created_at", "eq", "today")}, "filter"),
    ({"filter": _f('config.a"b', "eq", 1)}, "filter"),
    ({"column": "config."}, "column"),
    ({"column": "cfg.lr"}, "column"),
    ({"column": "config." + "k" * 201}, "column"),
    ({"sort": "nope"}, "sort"),
    ({"order": "up"}, "order"),
    ({"group_by": "tag"}, "group_by"),
    ({"offset": -1}, "offset"),
    ({"sort": "name", "cursor": "1000000.5_" + "a" * 16}, "cursor"),
])
def test_bad_table_parameters_are_422_naming_them(client, sweep, params, field):
    r = client.get(API, params=params)
    assert r.status_code == 422, r.text
    assert field in r.json()["error"]["field"].split("."), r.json()


def test_private_runs_of_another_project_never_match(client, seed, auth):
    seed.run("other", name="hidden").start(visibility="private", config={"lr": 0.5}, group="g")
    seed.run("demo", name="mine").start(visibility="private", config={"lr": 0.5}, group="g")
    seed.run("demo", name="open").start(config={"lr": 0.1}, group="g")
    params = {"filter": _f("config.lr", "ge", 0), "sort": "config.lr", "group_by": "group", "column": "config.lr"}
    anon = client.get(API, params=params).json()
    assert names(anon) == ["open"] and anon["groups"][0]["count"] == 1
    assert anon["groups"][0]["aggregates"]["config.lr"]["max"] == 0.1
    team = client.get(API, params=params, headers=auth(seed.token("demo"))).json()
    assert names(team) == ["mine", "open"] and team["groups"][0]["count"] == 2


def test_withheld_values_neither_match_nor_show(client, seed, auth):
    """A config key or metric the run's policy withholds, and a path, are no value at all to the public."""
    token = seed.token("demo")
    run = seed.run("demo", name="secretive").start(config={"lr": 0.5, "seed": 1, "ckpt": "/home/me/x.pt",
                                                          "out_dir": "runs"})
    run.log({"train/loss": [(1, 2.0)], "val/loss": [(1, 3.0)]})
    r = client.put(f"{API}/{run.run}/policy", json={"config": ["seed", "ckpt", "out_dir"], "metrics": ["val/*"]},
                   headers=auth(token))
    assert r.status_code == 200, r.text
    columns = {"column": ["config.lr", "config.seed", "config.ckpt", "metric.train/loss", "metric.val/loss"]}
    for f in (_f("config.lr", "eq", 0.5), _f("metric.train/loss", "eq", 2), _f("config.ckpt", "eq", "/home/me/x.pt"),
              _f("config.out_dir", "eq", "runs")):
        assert names(client.get(API, params={"filter": f}).json()) == [], f
        assert names(client.get(API, params={"filter": f}, headers=auth(token)).json()) == ["secretive"], f
    for f in (_f("config.seed", "eq", 1), _f("metric.val/loss", "eq", 3)):
        assert names(client.get(API, params={"filter": f}).json()) == ["secretive"], f
    anon = client.get(API, params=columns).json()["runs"][0]["values"]
    assert anon == {"config.seed": 1, "config.ckpt": "[withheld]", "metric.val/loss": 3.0}
    grouped = client.get(API, params={**columns, "group_by": "group"}).json()["groups"][0]["aggregates"]
    assert "config.lr" not in grouped and grouped["metric.val/loss"]["max"] == 3.0


def test_keys_are_data_never_sql(client, seed):
    """Keys with quotes, brackets, dots and SQL in them address exactly that key (bound JSON paths)."""
    odd = ["a'b", "x') OR 1=1 --", "k[0]", "a.b", "$", "😀 ünï", "back\\slash"]
    seed.run(name="odd").start(config={k: i for i, k in enumerate(odd)} | {"a": {"b": 99}})
    seed.run(name="plain").start(config={"a": 1})
    for i, key in enumerate(odd):
        body = client.get(API, params={"filter": _f(f"config.{key}", "eq", i), "sort": f"config.{key}",
                                       "column": f"config.{key}", "group_by": "group"})
        assert body.status_code == 200, body.text
        assert names(body.json()) == ["odd"], key
        assert body.json()["runs"][0]["values"] == {f"config.{key}": i}
        assert body.json()["groups"][0]["aggregates"][f"config.{key}"]["max"] == i
    assert names(client.get(API, params={"filter": _f("config.a", "eq", 1)}).json()) == ["plain"]
