"""The cacheable broadcast (docs/live.md, "Following a run through a cache") against a real server
process: a public follower of edge + pieces ends holding exactly the API's points across pieces,
a resume and a policy change; the cache headers keep the team's answers out of shared caches; a
delayed run's edge and pieces never hold a version before it is due; hostile input is a JSON 4xx
naming the field."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from runcast.wire import events as ev

from stream.broadcast_follower import Follower, api_points

P = 4
KEYS = ["loss", "lr", "acc"]


def _put(server: Any, run: str, body: dict[str, Any]) -> None:
    r = server.api.put(f"/api/v1/runs/{run}/policy", json=body, headers={"Authorization": f"Bearer {server.token}"})
    assert r.status_code == 200, r.text


def _settle(server: Any, run: str, version: int) -> None:
    """Wait until ``version`` is stored (production stores batches after the 202, in a worker)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = server.api.get(f"/api/v1/runs/{run}/broadcast/edge", headers={"Authorization": f"Bearer {server.token}"})
        if r.json()["version"] >= version:
            return
        time.sleep(0.05)
    raise AssertionError(f"version {version} not stored in 30 s")


def _resume(w: Any, at_step: int) -> None:
    """What ``runcast.init(resume=...)`` sends: the run again, in a new segment opened at ``at_step``."""
    w.segment = ev.new_id()
    w.post([w._event("run_started", project=w.project, name="stream test", visibility="public",
                     resume_step=at_step, alerts={"enabled": False})])
    w.step = at_step


@pytest.fixture(params=["embedded", pytest.param("production", marks=pytest.mark.services)])
def small_pieces(request: pytest.FixtureRequest, start_server: Any) -> Any:
    return start_server(request.param, RUNCAST_BROADCAST_PIECE_VERSIONS=str(P))


def test_a_public_follower_holds_exactly_the_api_points(small_pieces: Any) -> None:
    server = small_pieces
    w = server.writer().start()
    live = Follower(server.api, w.run)
    for i in range(11):
        w.batch(3, KEYS, note=f"note {i}")
        if i % 3 == 0:
            live.poll()
    _resume(w, 20)  # a new segment that replaces steps 20.. of the first
    for _ in range(6):
        w.batch(2, KEYS[:2])
        live.poll()
    _settle(server, w.run, 1 + 11 + 1 + 6)
    live.poll()
    truth = api_points(server.api, w.run, KEYS)
    assert {k[1] for k in truth} == {0, 1}
    assert live.points == truth
    assert live.notes == w.notes
    late = Follower(server.api, w.run)  # everything from pieces and one edge
    late.poll()
    assert late.points == truth and late.notes == w.notes
    assert late.versions == sorted(set(late.versions))
    pieces = [r for r in late.responses if "/pieces/" in str(r.url)]
    assert len(pieces) == late.version // P >= 4
    # The pieces hold the stream's messages: the same versions, the same JSON.
    team = Follower(server.api, w.run, headers={"Authorization": f"Bearer {server.token}"})
    team.poll()
    assert team.points == truth and team.versions == late.versions


def test_cache_headers_anonymous_shared_and_credentialed_private(small_pieces: Any) -> None:
    server = small_pieces
    w = server.writer().start()
    for _ in range(5):
        w.batch(2, KEYS[:1])
    _settle(server, w.run, 6)
    edge = server.api.get(f"/api/v1/runs/{w.run}/broadcast/edge")
    assert edge.status_code == 200
    assert edge.headers["cache-control"] == "public, max-age=1, stale-while-revalidate=1"
    assert edge.headers["etag"].startswith('"') and "Cookie" in edge.headers["vary"]
    body = edge.json()
    assert body["version"] == 6 and body["last_piece"] == 0 and body["piece_versions"] == P
    assert [m["version"] for m in body["messages"]] == [5, 6]
    again = server.api.get(f"/api/v1/runs/{w.run}/broadcast/edge", headers={"If-None-Match": edge.headers["etag"]})
    assert again.status_code == 304 and again.headers["etag"] == edge.headers["etag"]
    url = f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy={body['policy']}"
    piece = server.api.get(url)
    assert piece.status_code == 200
    assert piece.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert [m["version"] for m in piece.json()["messages"]] == [1, 2, 3, 4]
    assert server.api.get(url, headers={"If-None-Match": piece.headers["etag"]}).status_code == 304
    unsealed = server.api.get(f"/api/v1/runs/{w.run}/broadcast/pieces/1?policy={body['policy']}")
    assert unsealed.status_code == 404 and unsealed.json()["error"]["field"] == "piece"
    assert unsealed.headers["cache-control"] == "no-store"
    credentials = [{"Authorization": f"Bearer {server.token}"}, {"Authorization": f"Bearer {server.new_token('rivals')}"},
                   {"Cookie": "runcast_session=stale-or-forged"}]
    for headers in credentials:
        team_edge = server.api.get(f"/api/v1/runs/{w.run}/broadcast/edge", headers=headers)
        assert team_edge.status_code == 200 and team_edge.headers["cache-control"] == "private, no-store"
        fp = team_edge.json()["policy"]
        team_piece = server.api.get(f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy={fp}", headers=headers)
        assert team_piece.status_code == 200 and team_piece.headers["cache-control"] == "private, no-store"


def test_withheld_kinds_and_a_policy_change_reach_the_follower(small_pieces: Any) -> None:
    server = small_pieces
    w = server.writer().start()
    follower = Follower(server.api, w.run)
    for i in range(6):
        w.batch(2, KEYS, note=f"n{i}")
    _settle(server, w.run, 7)
    follower.poll()
    old = follower.policy
    assert {k[0] for k in follower.points} == set(KEYS) and follower.notes
    _put(server, w.run, {"metrics": ["lr"], "notes": "hidden"})
    for _ in range(3):
        w.batch(2, KEYS)
    _settle(server, w.run, 11)
    follower.poll()
    assert follower.resets == 1 and follower.policy != old
    assert {k[0] for k in follower.points} == {"lr"} and follower.notes == []
    assert follower.points == api_points(server.api, w.run, ["lr"])
    stale = server.api.get(f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy={old}")
    assert stale.status_code == 409 and stale.json()["error"]["field"] == "policy"
    assert stale.headers["cache-control"] == "no-store"
    # The team's pieces are the team's: everything, whatever the policy.
    team = Follower(server.api, w.run, headers={"Authorization": f"Bearer {server.token}"})
    team.poll()
    assert {k[0] for k in team.points} == set(KEYS) and len(team.notes) == 6


def test_a_delayed_run_never_shows_a_version_before_it_is_due(start_server: Any) -> None:
    server = start_server("embedded", RUNCAST_BROADCAST_PIECE_VERSIONS=str(P))
    delay = 2.0
    w = server.writer().start()  # 1
    _put(server, w.run, {"delay_s": delay})  # 2
    sent: dict[int, float] = {}  # version -> when its POST began (it was stored after that)
    follower = Follower(server.api, w.run)
    seen: list[tuple[float, int]] = []  # (when the answer came back, a version it held)
    for v in range(3, 3 + 14):
        sent[v] = time.time()
        w.batch(1, KEYS[:1])
        follower.poll()
        now = time.time()
        for r in follower.responses:
            body = r.json()
            seen.extend((now, v) for v in [body.get("version", 0), *(m["version"] for m in body["messages"])])
        follower.responses.clear()
        time.sleep(0.25)
    for at, v in seen:
        assert v not in sent or sent[v] <= at - delay, (v, at - sent[v])
    undue = server.api.get(f"/api/v1/runs/{w.run}/broadcast/edge").json()
    assert undue["version"] < 16
    not_yet = server.api.get(f"/api/v1/runs/{w.run}/broadcast/pieces/3?policy={undue['policy']}")
    assert not_yet.status_code == 404 and not_yet.json()["error"]["field"] == "piece"
    time.sleep(delay + 0.5)
    follower.poll()
    assert follower.version == 16
    assert follower.points == api_points(server.api, w.run, KEYS[:1])
    # Lifting the delay is a policy change: a new fingerprint, the old one refused.
    old = follower.policy
    _put(server, w.run, {"delay_s": 0})
    assert server.api.get(f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy={old}").status_code == 409
    follower.poll()
    assert follower.resets == 1 and follower.version == 17


def test_hostile_input_is_a_json_4xx_naming_the_field(start_server: Any) -> None:
    server = start_server("embedded")
    w = server.writer().start()
    hidden = server.writer(project="secret")
    hidden.token = server.new_token("secret")
    hidden.start(visibility="private")
    fp = server.api.get(f"/api/v1/runs/{w.run}/broadcast/edge").json()["policy"]
    rival = {"Authorization": f"Bearer {server.new_token('rivals')}"}
    cases: list[tuple[str, dict[str, str], int, str]] = [
        ("/api/v1/runs/x/broadcast/edge", {}, 404, "run"),
        ("/api/v1/runs/" + "a" * 65 + "/broadcast/edge", {}, 422, "run_id"),
        ("/api/v1/runs/run_doesnotexist/broadcast/pieces/0?policy=" + fp, {}, 404, "run"),
        (f"/api/v1/runs/{hidden.run}/broadcast/edge", {}, 404, "run"),
        (f"/api/v1/runs/{hidden.run}/broadcast/edge", rival, 404, "run"),
        (f"/api/v1/runs/{hidden.run}/broadcast/pieces/0?policy={fp}", rival, 404, "run"),
        (f"/api/v1/runs/{w.run}/broadcast/pieces/-1?policy={fp}", {}, 422, "piece"),
        (f"/api/v1/runs/{w.run}/broadcast/pieces/{10**16}?policy={fp}", {}, 422, "piece"),
        (f"/api/v1/runs/{w.run}/broadcast/pieces/{10**15}?policy={fp}", {}, 404, "piece"),
        (f"/api/v1/runs/{w.run}/broadcast/pieces/abc?policy={fp}", {}, 422, "piece"),
        (f"/api/v1/runs/{w.run}/broadcast/pieces/0", {}, 422, "policy"),
        (f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy=../../etc", {}, 422, "policy"),
        (f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy=" + "0" * 16, {}, 409, "policy"),
        (f"/api/v1/runs/{w.run}/broadcast/edge", {"Authorization": "Bearer nope"}, 401, "Authorization"),
    ]
    for path, headers, status, field in cases:
        r = server.api.get(path, headers=headers)
        assert (r.status_code, r.headers["content-type"]) == (status, "application/json"), (path, r.text)
        assert r.json()["error"]["field"] == field, (path, r.text)
    # The private run's own team reads it, privately.
    team = server.api.get(f"/api/v1/runs/{hidden.run}/broadcast/edge", headers={"Authorization": f"Bearer {hidden.token}"})
    assert team.status_code == 200 and team.headers["cache-control"] == "private, no-store"
    assert isinstance(httpx.Headers(team.headers).get("etag"), str)
