"""Run management (PATCH / DELETE /runs/{id}) and tokens (GET /tokens, DELETE /tokens/{id}),
from the user's seat: the run's project's token only, another project's token changes nothing,
delete leaves no row of the run in any table and every row of the others, a revoked token
stops working on the next request."""

from __future__ import annotations

from typing import Any

import pytest
from runcast_server.tables import METADATA
from sqlalchemy import text

PATCH_ERRORS = [
    ({"name": ""}, "name"),
    ({"name": "  "}, "name"),
    ({"name": "x" * 201}, "name"),
    ({"name": "a\x00b"}, "name"),
    ({"tags": {"add": [""]}}, "tags"),
    ({"tags": {"add": ["x" * 65]}}, "tags"),
    ({"tags": {"add": ["tab\there"]}}, "tags"),
    ({"tags": {"add": ["bad,tag"]}}, "tags"),  # the SDK's rule: init(tags=["bad,tag"]) is refused too
    ({"tags": {"add": [f"t{i}" for i in range(65)]}}, "tags"),
    ({"tags": {"add": "not-a-list"}}, "tags"),
    ({"tags": {"other": ["x"]}}, "tags"),
    ({"archived": "maybe"}, "archived"),
    ({"notes": "x" * 10_001}, "notes"),
    ({"notes": "a\x00b"}, "notes"),
    ({"notes": 5}, "notes"),
    ({"visibility": "private"}, "visibility"),
]


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def two(db: Any, client: Any, seed: Any) -> dict[str, Any]:
    """Project p with runs a and b (points in two segments, events, an alert config, a
    subscription), project q with one run."""
    runs = {}
    for name in ("a", "b"):
        sim = seed.run("pproj", name=name).start(config={"lr": 1})
        sim.log({"loss": [(s, 1.0 / s) for s in range(1, 301)], "lr": [(s, 0.1) for s in range(1, 301)]})
        sim.send([sim.event("note", step=5, text="hello"), sim.event("data_mix", step=1, weights={"web": 1.0}),
                  sim.sample(5, "p", f"{name} says"), sim.evaluation(5, "task", {"acc": 0.5}),
                  sim.media(5, "h", "histogram", edges=[0, 1], counts=[3])])
        sim.resume(200)
        sim.log({"loss": [(s, 2.0) for s in range(201, 260)]})
        sim.finish()
        runs[name] = sim.run
    q = seed.run("qproj", name="q").start()
    q.log({"loss": [(1, 1.0)]})
    p_token, q_token = seed.token("pproj"), seed.token("qproj")
    for run in runs.values():
        assert client.put(f"/api/v1/runs/{run}/alerts/config", json={"spike": {"k": 5}},
                          headers=_auth(p_token)).status_code == 200
        _alert_rows(db, run)
    return {**runs, "q": q.run, "p_token": p_token, "q_token": q_token}


def _alert_rows(db: Any, run: str) -> None:
    """An alert, a detector state, a subscription and a delivery of ``run`` (what the detectors
    and a subscriber would leave; written directly: the webhook's host cannot resolve here)."""
    from runcast_server.alerts.models import (
        Alert,
        AlertDelivery,
        DetectorState,
        Subscription,
    )

    with db.scope() as session:
        alert = Alert(run_id=run, kind="spike", step=3, opened_at=1.0, evidence={})
        sub = Subscription(run_id=run, channel="webhook", target="https://hooks.example/h", status="active",
                           unsub_token=f"u{run}", base_url="http://testserver", created_at=1.0, created_ip="x")
        session.add_all([alert, sub, DetectorState(run_id=run, segment_id=0, key="", detector="stall", updated_at=1.0)])
        session.flush()
        session.add(AlertDelivery(subscription_id=sub.id, alert_id=alert.id, phase="open", created_at=1.0))


def _listed(client: Any, token: str | None = None, **params: Any) -> list[str]:
    headers = _auth(token) if token else {}
    res = client.get("/api/v1/runs", params=params, headers=headers)
    assert res.status_code == 200, res.text
    return [r["id"] for r in res.json()["runs"]]


def test_rename_tag_archive_and_restore(client, two):
    run, auth = two["a"], _auth(two["p_token"])
    res = client.patch(f"/api/v1/runs/{run}", json={"name": "renamed ✓", "tags": {"add": ["b", "a", "b"]}}, headers=auth)
    assert res.status_code == 200, res.text
    assert (res.json()["name"], res.json()["tags"], res.json()["archived_at"]) == ("renamed ✓", ["a", "b"], None)
    res = client.patch(f"/api/v1/runs/{run}", json={"tags": {"add": ["c"], "remove": ["a", "zz"]}}, headers=auth)
    assert res.json()["tags"] == ["b", "c"]
    detail = client.get(f"/api/v1/runs/{run}").json()
    assert (detail["name"], detail["tags"]) == ("renamed ✓", ["b", "c"])
    assert set(_listed(client)) == {two["a"], two["b"], two["q"]}

    archived = client.patch(f"/api/v1/runs/{run}", json={"archived": True}, headers=auth).json()["archived_at"]
    assert isinstance(archived, float)
    again = client.patch(f"/api/v1/runs/{run}", json={"archived": True}, headers=auth).json()["archived_at"]
    assert again == archived  # the first archive time is kept
    assert set(_listed(client)) == {two["b"], two["q"]}
    assert set(_listed(client, project="pproj")) == {two["b"]}
    assert set(_listed(client, archived="include")) == {two["a"], two["b"], two["q"]}
    assert _listed(client, archived="only") == [run]
    assert client.get(f"/api/v1/runs/{run}").status_code == 200  # still readable by id
    assert client.get(f"/api/v1/runs/{run}/metrics", params={"key": "loss"}).status_code == 200
    restored = client.patch(f"/api/v1/runs/{run}", json={"archived": False}, headers=auth).json()
    assert restored["archived_at"] is None and run in _listed(client)


def test_notes_are_set_and_cleared(client, two):
    run, auth = two["a"], _auth(two["p_token"])
    res = client.patch(f"/api/v1/runs/{run}", json={"notes": "diverged at 8k ✓"}, headers=auth)
    assert res.status_code == 200, res.text
    assert client.get(f"/api/v1/runs/{run}", headers=auth).json()["notes"] == "diverged at 8k ✓"
    assert client.patch(f"/api/v1/runs/{run}", json={"notes": ""}, headers=auth).status_code == 200
    assert client.get(f"/api/v1/runs/{run}", headers=auth).json()["notes"] is None


@pytest.mark.parametrize("body,field", PATCH_ERRORS)
def test_bad_changes_are_refused_naming_the_field_and_change_nothing(client, two, body, field):
    run = two["a"]
    before = _state(client, run)
    res = client.patch(f"/api/v1/runs/{run}", json=body, headers=_auth(two["p_token"]))
    assert res.status_code == 422, res.text
    assert res.json()["error"]["field"].startswith(field), res.json()
    assert _state(client, run) == before


def _state(client: Any, run: str) -> dict[str, Any]:
    body = client.get(f"/api/v1/runs/{run}").json()
    body.pop("heartbeat_age_s")
    return body


def test_a_run_started_with_the_most_tags_init_takes_can_still_be_retagged(client, seed):
    """One limit for tags (runcast.wire.limits.MAX_TAGS): what init() stores, PATCH can change."""
    from runcast.wire.events import MAX_TAGS

    sim = seed.run("tagged", name="full").start(tags=[f"t{i:02d}" for i in range(MAX_TAGS)])
    token = seed.token("tagged")
    answer = client.patch(f"/api/v1/runs/{sim.run}", json={"tags": {"remove": ["t00"]}}, headers=_auth(token))
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["tags"]) == MAX_TAGS - 1
    answer = client.patch(f"/api/v1/runs/{sim.run}", json={"tags": {"add": ["t00", "one-more"]}}, headers=_auth(token))
    assert answer.status_code == 422 and answer.json()["error"]["field"].startswith("tags")


def test_another_projects_token_changes_nothing_and_answers_as_unknown(client, two):
    q = _auth(two["q_token"])
    before = {run: _state(client, run) for run in (two["a"], two["b"])}
    for method, kwargs in (("PATCH", {"json": {"name": "pwned", "archived": True, "tags": {"add": ["x"]}, "notes": "x"}}),
                           ("DELETE", {})):
        theirs = client.request(method, f"/api/v1/runs/{two['a']}", headers=q, **kwargs)
        unknown = client.request(method, "/api/v1/runs/unknownrun000000", headers=q, **kwargs)
        assert theirs.status_code == unknown.status_code == 404
        assert theirs.json() == unknown.json()
        # no token at all: 401, before any lookup
        assert client.request(method, f"/api/v1/runs/{two['a']}", **kwargs).status_code == 401
    assert {run: _state(client, run) for run in (two["a"], two["b"])} == before
    assert client.get(f"/api/v1/runs/{two['a']}/export").text.count("\n") == 300 * 2 + 59


def _counts(db: Any, run: str, series: list[int]) -> dict[str, int]:
    """Rows of ``run`` in every table that has a run_id column, plus points and rollups by series."""
    out = {}
    with db.engine.connect() as conn:
        out["runs"] = conn.execute(text("SELECT count(*) FROM runs WHERE id = :r"), {"r": run}).scalar_one()
        for table in METADATA.sorted_tables:
            if "run_id" in table.c:
                out[table.name] = conn.execute(
                    text(f"SELECT count(*) FROM {table.name} WHERE run_id = :r"), {"r": run}).scalar_one()
        ids = ",".join(str(i) for i in series) or "NULL"
        for name in ("points", "rollups"):
            out[name] = conn.execute(text(f"SELECT count(*) FROM {name} WHERE series_id IN ({ids})")).scalar_one()
        out["alert_deliveries"] = conn.execute(text(
            "SELECT count(*) FROM alert_deliveries WHERE alert_id IN (SELECT id FROM alerts WHERE run_id = :r) "
            "OR subscription_id IN (SELECT id FROM subscriptions WHERE run_id = :r)"), {"r": run}).scalar_one()
    return out


def _series(db: Any, run: str) -> list[int]:
    with db.engine.connect() as conn:
        return [r[0] for r in conn.execute(text("SELECT id FROM series WHERE run_id = :r"), {"r": run})]


def test_delete_removes_every_row_of_the_run_and_only_of_it(db: Any, client, two):
    a, b = two["a"], two["b"]
    a_series, b_series = _series(db, a), _series(db, b)
    before_a, before_b, before_q = _counts(db, a, a_series), _counts(db, b, b_series), _counts(db, two["q"], _series(db, two["q"]))
    for table in ("runs", "segments", "series", "points", "rollups", "events", "run_versions", "alert_configs",
                  "subscriptions", "alerts", "detector_states", "alert_deliveries", "samples", "evals", "media"):
        assert before_a[table] > 0, table  # the test would pass vacuously otherwise
    with db.engine.connect() as conn:  # the server's step times (_timestamp): one or more a batch
        times = conn.execute(text("SELECT count(*) FROM points p JOIN series s ON s.id = p.series_id "
                                  "WHERE s.run_id = :r AND s.key = '_timestamp'"), {"r": a}).scalar_one()
    assert before_a["points"] == 300 * 2 + 59 + times and times >= 2
    res = client.delete(f"/api/v1/runs/{a}", headers=_auth(two["p_token"]))
    assert res.status_code == 200, res.text
    assert res.json() == {"run": a, "deleted": True, "points": 659, "series": before_a["series"],
                          "segments": 2, "events": before_a["events"]}
    assert _counts(db, a, a_series) == {name: 0 for name in before_a}
    assert _counts(db, b, b_series) == before_b and _counts(db, two["q"], _series(db, two["q"])) == before_q
    assert client.get(f"/api/v1/runs/{a}").status_code == 404
    assert a not in _listed(client, archived="include")
    assert client.delete(f"/api/v1/runs/{a}", headers=_auth(two["p_token"])).status_code == 404
    assert client.get(f"/api/v1/runs/{b}/export").text.count("\n") == 659


def test_token_list_shows_no_secret_and_last_use(client, seed, two):
    p = two["p_token"]
    res = client.get("/api/v1/tokens", headers=_auth(p))
    assert res.status_code == 200
    (token,) = res.json()["tokens"]
    assert set(token) == {"id", "project", "prefix", "label", "created_at", "last_used_at", "revoked_at"}
    assert token["project"] == "pproj" and p.startswith(token["prefix"]) and len(token["prefix"]) == 10
    assert p not in res.text and p[10:] not in res.text
    assert isinstance(token["last_used_at"], float) and token["revoked_at"] is None
    q_tokens = client.get("/api/v1/tokens", headers=_auth(two["q_token"])).json()["tokens"]
    assert [t["project"] for t in q_tokens] == ["qproj"]
    assert client.get("/api/v1/tokens").status_code == 401


def _new_token(db: Any, project: str) -> str:
    from runcast_server.core.auth import create_token

    with db.scope() as session:
        return create_token(session, project, label="second")


def _ingest(run: str, segment: str, step: int) -> dict[str, Any]:
    return {"v": 1, "events": [{"v": 1, "type": "metrics", "run": run, "segment": segment, "seq": 10_000 + step,
                                "ts": 1.0, "step": step, "values": {"loss": 9.0}}]}


def test_a_revoked_token_stops_working_at_once_on_every_write(db: Any, client, two):
    keep, doomed = two["p_token"], _new_token(db, "pproj")
    run = two["b"]
    with db.engine.connect() as conn:
        segment = conn.execute(text("SELECT uid FROM segments WHERE run_id = :r ORDER BY \"index\" DESC LIMIT 1"),
                               {"r": run}).scalar_one()
    assert client.post("/api/v1/ingest", json=_ingest(run, segment, 1000), headers=_auth(doomed)).status_code == 202
    listed = client.get("/api/v1/tokens", headers=_auth(keep)).json()["tokens"]
    doomed_id = next(t["id"] for t in listed if t["label"] == "second")
    # another project's token cannot revoke it: 404 as for an unknown id, nothing revoked
    for token_id in (doomed_id, 999_999):
        res = client.delete(f"/api/v1/tokens/{token_id}", headers=_auth(two["q_token"]))
        assert res.status_code == 404 and res.json()["error"]["field"] == "token_id"
    assert client.get("/api/v1/tokens", headers=_auth(doomed)).status_code == 200
    revoked = client.delete(f"/api/v1/tokens/{doomed_id}", headers=_auth(keep))
    assert revoked.status_code == 200 and isinstance(revoked.json()["revoked_at"], float)
    before = _state(client, run)
    writes = [
        ("POST", "/api/v1/ingest", {"json": _ingest(run, segment, 1001)}),
        ("PATCH", f"/api/v1/runs/{run}", {"json": {"name": "by a revoked token"}}),
        ("DELETE", f"/api/v1/runs/{run}", {}),
        ("PUT", f"/api/v1/runs/{run}/alerts/config", {"json": {"spike": {"k": 9}}}),
        ("GET", "/api/v1/tokens", {}),
        ("DELETE", f"/api/v1/tokens/{doomed_id}", {}),
        ("GET", f"/api/v1/runs/{run}", {}),  # reads with it too: a revoked token is a 401, not anonymous
    ]
    for method, path, kwargs in writes:
        res = client.request(method, path, headers=_auth(doomed), **kwargs)
        assert res.status_code == 401, (method, path, res.text)
        assert res.json()["error"]["field"] == "Authorization"
    assert _state(client, run) == before
    assert client.get(f"/api/v1/runs/{run}/alerts/config", headers=_auth(keep)).json()["overrides"]["spike"]["k"] == 5
    # the kept token still works; revoking twice keeps the first time
    again = client.delete(f"/api/v1/tokens/{doomed_id}", headers=_auth(keep)).json()
    assert again["revoked_at"] == revoked.json()["revoked_at"]
    assert client.post("/api/v1/ingest", json=_ingest(run, segment, 1002), headers=_auth(keep)).status_code == 202
