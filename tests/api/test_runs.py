"""GET /api/v1/runs and /api/v1/runs/{id}: pagination, filters, visibility, detail."""

from __future__ import annotations

import time

import pytest

API = "/api/v1/runs"


def ids(body: dict) -> list[str]:
    return [r["id"] for r in body["runs"]]


def test_pages_have_no_duplicates_or_gaps_while_runs_are_added(client, seed):
    base = time.time() - 1000
    original = []
    for i in range(7):
        run = seed.run(name=f"r{i}").start(received_at=base + i)
        original.append(run.run)
    # Two runs share a created_at: the id breaks the tie.
    tie = seed.run(name="tie").start(received_at=base + 3)
    original.append(tie.run)
    # Newest first: created_at desc, then id desc.
    created = {r: base + i for i, r in enumerate(original[:7])} | {tie.run: base + 3}
    expected = sorted(original, key=lambda r: (created[r], r), reverse=True)

    seen: list[str] = []
    cursor = None
    added = 0
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        body = client.get(API, params=params).json()
        seen += ids(body)
        cursor = body["next_cursor"]
        # A new run arrives between every two pages: it is newer than everything paged.
        seed.run(name=f"new{added}").start(received_at=base + 100 + added)
        added += 1
        if cursor is None:
            break
    assert seen == expected
    assert added == 3


def test_filters_by_project_and_status(client, seed):
    now = time.time()
    a = seed.run("alpha", name="a-running").start()
    a.log({"loss": [(1, 2.0)]})
    b = seed.run("alpha", name="a-done").start()
    b.finish("finished", step=5)
    c = seed.run("beta", name="b-failed").start()
    c.finish("failed")
    d = seed.run("beta", name="b-stalled").start(received_at=now - 10_000)

    def names(**params):
        body = client.get(API, params=params).json()
        return sorted(r["name"] for r in body["runs"])

    assert names(project="alpha") == ["a-done", "a-running"]
    assert names(project="beta") == ["b-failed", "b-stalled"]
    assert names(project="nobody") == []
    assert names(status="running") == ["a-running"]
    assert names(status="finished") == ["a-done"]
    assert names(status="failed") == ["b-failed"]
    assert names(status="stalled") == ["b-stalled"]
    assert names(project="alpha", status="stalled") == []
    stalled = client.get(f"{API}/{d.run}").json()
    assert stalled["status"] == "stalled"
    assert stalled["heartbeat_age_s"] == pytest.approx(10_000, abs=60)


def test_visibility_rules(client, seed, auth):
    pub = seed.run("owner", name="pub").start(visibility="public")
    unl = seed.run("owner", name="unl").start(visibility="unlisted")
    priv = seed.run("owner", name="priv").start(visibility="private")
    owner, other = seed.token("owner"), seed.token("other")

    assert ids(client.get(API).json()) == [pub.run]
    assert ids(client.get(API, headers=auth(other)).json()) == [pub.run]
    assert sorted(ids(client.get(API, headers=auth(owner)).json())) == sorted(
        [pub.run, unl.run, priv.run]
    )

    assert client.get(f"{API}/{pub.run}").status_code == 200
    assert client.get(f"{API}/{unl.run}").status_code == 200
    for headers in ({}, auth(other)):
        for path in ("", "/metrics?key=loss", "/events", "/export"):
            res = client.get(f"{API}/{priv.run}{path}", headers=headers)
            assert res.status_code == 404, path
            assert res.json() == {"error": {"message": "run not found", "field": "run"}}
    assert (
        client.get(f"{API}/{priv.run}", headers=auth(owner)).json()["visibility"]
        == "private"
    )

    bad = client.get(API, headers=auth("rc_not-a-token"))
    assert bad.status_code == 401
    assert bad.json()["error"]["field"] == "Authorization"


def test_unknown_run_is_404_json(client, seed):
    for run_id in ("doesnotexist", "bad id!"):
        res = client.get(f"{API}/{run_id}")
        assert res.status_code == 404
        assert res.json() == {"error": {"message": "run not found", "field": "run"}}


def test_detail_after_resume(client, seed):
    run = seed.run(name="resumed").start(
        config={"lr": 3e-4, "layers": 12},
        code={"sha": "abc123", "dirty": False},
        env={"python": "3.11"},
        seed=1234,
    )
    run.log(
        {
            "loss": [(s, 10.0 - s / 10) for s in range(100)],
            "lr": [(s, 1e-3) for s in range(0, 100, 10)],
        }
    )
    first = run.segment
    run.resume(50)
    run.log({"loss": [(s, 5.0 - s / 100) for s in range(50, 80)]})
    assert run.segment != first

    body = client.get(f"{API}/{run.run}").json()
    assert body["name"] == "resumed"
    assert body["status"] == "running"
    assert body["config"] == {"lr": 3e-4, "layers": 12}
    assert body["code"] == {"sha": "abc123", "dirty": False}
    assert body["env"] == {"python": "3.11"}
    assert body["seed"] == 1234
    assert body["keys"] == ["loss", "lr"]
    assert [
        {k: s[k] for k in ("index", "start_step", "resumed", "last_step")}
        for s in body["segments"]
    ] == [
        {"index": 0, "start_step": 0, "resumed": False, "last_step": 99},
        {"index": 1, "start_step": 50, "resumed": True, "last_step": 79},
    ]
    assert body["last_step"] == 99
    assert body["last_values"]["lr"] == {"step": 90, "value": 1e-3}

    metrics = client.get(f"{API}/{run.run}/metrics", params={"key": "loss"}).json()
    assert metrics["level"] == 0
    segs = {s["segment"]: s for s in metrics["series"]}
    assert segs[0]["step"] == list(
        range(100)
    )  # the abandoned branch 50..99 is still there
    assert segs[0]["last"][50:] == [10.0 - s / 10 for s in range(50, 100)]
    assert segs[1]["start_step"] == 50
    assert segs[1]["step"] == list(range(50, 80))
    assert segs[1]["last"] == [5.0 - s / 100 for s in range(50, 80)]
    only = client.get(
        f"{API}/{run.run}/metrics", params={"key": "loss", "segment": 1}
    ).json()
    assert [s["segment"] for s in only["series"]] == [1]


def test_summary_shape_and_nonfinite_last_values(client, seed):
    run = seed.run(name="shape").start()
    run.log({"loss": [(1, 1.5), (2, float("nan"))], "gnorm": [(2, float("inf"))]})
    body = client.get(API).json()
    (summary,) = body["runs"]
    assert set(summary) == {
        "id", "project", "name", "status", "visibility", "created_at", "started_at", "finished_at",
        "heartbeat_at", "heartbeat_age_s", "last_step", "last_values", "tags", "group", "job_type", "archived_at", "values",
    }  # fmt: skip
    assert (summary["tags"], summary["archived_at"]) == ([], None)
    assert summary["project"] == "demo"
    assert summary["last_step"] == 2
    assert summary["last_values"] == {
        "loss": {"step": 2, "value": "NaN"},
        "gnorm": {"step": 2, "value": "Infinity"},
    }
    assert body["next_cursor"] is None
