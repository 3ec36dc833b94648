"""Dashboard sign-in from the browser's seat: a project token becomes an HttpOnly session cookie
that reads the project's private runs (REST, export, checkpoint download, stream live and
replayed), never another project's, never writes; it ends at sign-out, expiry and revocation.

The cookie reaching every read route, and no other project's, is walked route by route in
tests/api/test_walls.py.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from artifacts.live import LiveServer
from stream.helpers import RunWriter, points_of, sse

API = "/api/v1"
COOKIE = "runcast_session"


def _sign_in(client: Any, token: str, **headers: str) -> httpx.Response:
    return client.post(f"{API}/session", json={"token": token}, headers=headers)


def _browser(client: Any) -> TestClient:
    """A second browser on the same app (its own cookie jar)."""
    return TestClient(client.app)


@pytest.fixture
def world(settings: Any, client: Any, seed: Any) -> dict[str, Any]:
    root = settings.checkpoint_root
    (root / "pproj").mkdir(parents=True, exist_ok=True)
    weights = b"p's private weights"
    (root / "pproj" / "w.pt").write_bytes(weights)
    private = seed.run("pproj", name="secret").start(visibility="private", config={"lr": 1})
    private.log({"loss": [(1, 2.0), (2, 1.5)]})
    private.send([private.event("checkpoint", step=2, path="pproj/w.pt", size=len(weights),
                                sha256=hashlib.sha256(weights).hexdigest())])
    theirs = seed.run("qproj", name="theirs").start(visibility="private")
    theirs.log({"loss": [(1, 9.0)]})
    return {"private": private.run, "theirs": theirs.run, "p_token": seed.token("pproj"),
            "q_token": seed.token("qproj"), "weights": weights}


def test_sign_in_sets_an_httponly_strict_cookie_holding_only_a_hash_at_rest(db: Any, settings: Any, client, world):
    res = _sign_in(client, world["p_token"])
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["project"] == "pproj" and body["expires_at"] > 0
    header = res.headers["set-cookie"].lower()
    assert "httponly" in header and "samesite=strict" in header and "path=/" in header
    assert "secure" not in header  # plain http: a Secure cookie would never come back
    assert f"max-age={int(settings.session_ttl_s)}" in header
    secret = client.cookies[COOKIE]
    assert len(secret) >= 40 and world["p_token"] not in res.headers["set-cookie"]
    with db.engine.connect() as conn:
        rows = conn.execute(text("SELECT session_hash FROM dashboard_sessions")).scalars().all()
    assert rows == [hashlib.sha256(secret.encode()).hexdigest()]
    assert client.get(f"{API}/session").json() == body

    # Signing in again (here to another project) replaces the browser's session: one row, a new id.
    assert _sign_in(client, world["q_token"]).json()["project"] == "qproj"
    assert client.cookies[COOKIE] != secret
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT session_hash FROM dashboard_sessions")).scalars().all() == [
            hashlib.sha256(client.cookies[COOKIE].encode()).hexdigest()]
    assert client.get(f"{API}/runs/{world['private']}").status_code == 404  # p's run: not q's session's

    https = TestClient(client.app, base_url="https://testserver")
    assert "secure" in _sign_in(https, world["p_token"]).headers["set-cookie"].lower()


def test_the_cookie_reads_the_projects_private_run_everywhere_and_never_anothers(client, world):
    private, theirs = world["private"], world["theirs"]
    anonymous = _browser(client)
    assert _sign_in(client, world["p_token"]).status_code == 200
    listed = [r["id"] for r in client.get(f"{API}/runs").json()["runs"]]
    assert private in listed and theirs not in listed
    assert private not in [r["id"] for r in anonymous.get(f"{API}/runs").json()["runs"]]
    run = client.get(f"{API}/runs/{private}").json()
    assert run["config"] == {"lr": 1} and run["visibility"] == "private"
    metrics = client.get(f"{API}/runs/{private}/metrics", params={"key": "loss"}).json()
    assert metrics["series"][0]["step"] == [1, 2] and metrics["series"][0]["last"] == [2.0, 1.5]
    export = client.get(f"{API}/runs/{private}/export", params={"format": "csv"})
    assert export.status_code == 200 and "1.5" in export.text
    (ckpt,) = client.get(f"{API}/runs/{private}/checkpoints").json()["checkpoints"]
    download = client.get(f"{API}/runs/{private}/checkpoints/{ckpt['id']}/download")
    assert download.status_code == 200 and download.content == world["weights"]
    assert "private" in download.headers["cache-control"]
    badge = client.get(f"/badge/runs/{private}.svg")
    assert badge.status_code == 200 and "private" in badge.headers["cache-control"]
    for path in (f"{API}/runs/{private}", f"{API}/runs/{private}/export", f"/badge/runs/{private}.svg"):
        assert anonymous.get(path).status_code == 404, path
    # q's private run: exactly as an unknown run, for p's session.
    for path in (f"{API}/runs/{{}}", f"{API}/runs/{{}}/metrics?key=loss", f"{API}/runs/{{}}/export"):
        mine = client.get(path.format(theirs))
        unknown = client.get(path.format("unknownrun000000"))
        assert mine.status_code == 404 and mine.text.replace(theirs, "X") == unknown.text.replace("unknownrun000000", "X")


def test_wrong_revoked_and_admin_tokens_are_refused_alike(db: Any, client, world, seed):
    from runcast_server.core.auth import create_admin_token

    with db.scope() as session:
        admin = create_admin_token(session)
    bodies = set()
    for token in ("rc_no_such_token", world["q_token"] + "x", admin):
        res = _sign_in(client, token)
        assert res.status_code == 401 and res.json()["error"]["field"] == "token"
        bodies.add(res.text)
        assert COOKIE not in client.cookies
    mine = client.get(f"{API}/tokens", headers={"Authorization": f"Bearer {world['p_token']}"}).json()["tokens"]
    revoke = client.delete(f"{API}/tokens/{mine[0]['id']}", headers={"Authorization": f"Bearer {world['q_token']}"})
    assert revoke.status_code == 404  # q cannot revoke p's token
    client.delete(f"{API}/tokens/{mine[0]['id']}", headers={"Authorization": f"Bearer {world['p_token']}"})
    res = _sign_in(client, world["p_token"])
    assert res.status_code == 401 and res.text in bodies  # revoked: the same answer as never issued
    for bad in ({}, {"token": ""}, {"token": 5}, {"tok": "x"}):
        res = client.post(f"{API}/session", json=bad)
        assert res.status_code == 422 and res.json()["error"]["field"] == "token", bad


def test_revoking_the_token_ends_its_sessions_at_once(db: Any, client, world):
    from runcast_server.core.auth import create_token

    with db.scope() as session:
        token = create_token(session, "pproj", label="browser")  # `runcast token create pproj`
    assert _sign_in(client, token).status_code == 200
    assert client.get(f"{API}/runs/{world['private']}").status_code == 200
    listed = client.get(f"{API}/tokens", headers={"Authorization": f"Bearer {world['p_token']}"}).json()["tokens"]
    token_id = next(t["id"] for t in listed if token.startswith(t["prefix"]))
    assert client.delete(f"{API}/tokens/{token_id}",
                         headers={"Authorization": f"Bearer {world['p_token']}"}).status_code == 200
    assert client.get(f"{API}/session").status_code == 401
    assert client.get(f"{API}/runs/{world['private']}").status_code == 404  # an anonymous reader now
    other = _browser(client)  # a session opened with another token of the project lives on
    assert _sign_in(other, world["p_token"]).status_code == 200
    assert other.get(f"{API}/runs/{world['private']}").status_code == 200


def test_a_session_expires(client, world, monkeypatch):
    monkeypatch.setattr(client.app.state.context.settings, "session_ttl_s", 1.0)  # the app's settings
    res = _sign_in(client, world["p_token"])
    assert res.status_code == 200 and "max-age=1" in res.headers["set-cookie"].lower()
    assert client.get(f"{API}/runs/{world['private']}").status_code == 200
    stale = client.cookies[COOKIE]
    import time

    time.sleep(1.2)
    # The browser dropped it; a client that keeps sending it is no better off.
    replay = _browser(client)
    replay.cookies.set(COOKIE, stale)
    assert replay.get(f"{API}/session").status_code == 401
    assert replay.get(f"{API}/runs/{world['private']}").status_code == 404


def test_sign_out_deletes_the_session_and_clears_the_cookie(db: Any, client, world):
    assert _sign_in(client, world["p_token"]).status_code == 200
    secret = client.cookies[COOKIE]
    res = client.delete(f"{API}/session")
    assert res.status_code == 200 and res.json() == {"signed_out": True}
    assert 'runcast_session=""' in res.headers["set-cookie"] or "max-age=0" in res.headers["set-cookie"].lower()
    assert COOKIE not in client.cookies
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM dashboard_sessions")).scalar_one() == 0
    replay = _browser(client)
    replay.cookies.set(COOKIE, secret)
    assert replay.get(f"{API}/session").status_code == 401
    assert replay.get(f"{API}/runs/{world['private']}").status_code == 404
    assert client.delete(f"{API}/session").status_code == 200  # signing out twice is fine


def test_the_cookie_never_authorises_a_write(client, world):
    assert _sign_in(client, world["p_token"]).status_code == 200
    run = world["private"]
    batch = {"v": 1, "events": [{"v": 1, "type": "metrics", "run": run, "segment": "segment00000001", "seq": 0,
                                 "ts": 1.0, "step": 3, "values": {"loss": 9.0}}]}
    for method, path, body in (
        ("POST", f"{API}/ingest", batch),
        ("PATCH", f"{API}/runs/{run}", {"name": "renamed"}),
        ("DELETE", f"{API}/runs/{run}", None),
        ("PUT", f"{API}/runs/{run}/alerts/config", {"spike": {"k": 5}}),
        ("POST", f"{API}/runs/{run}/uploads", {}),
        ("GET", f"{API}/whoami", None),
        ("GET", f"{API}/tokens", None),
    ):
        res = client.request(method, path, json=body)
        assert res.status_code == 401 and res.json()["error"]["field"] == "Authorization", (method, path, res.text)
    # Subscribing (a write) with only the cookie: the private run is as unknown as to anyone.
    res = client.post(f"{API}/subscriptions", json={"run": run, "channel": "webhook", "url": "https://example.com/h"})
    assert res.status_code == 404
    detail = client.get(f"{API}/runs/{run}").json()
    assert detail["name"] == "secret" and detail["archived_at"] is None
    assert client.get(f"{API}/runs/{run}/metrics", params={"key": "loss"}).json()["series"][0]["step"] == [1, 2]


def test_sign_in_and_out_refuse_cross_site_requests(client, world):
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                    {"Origin": "https://evil.example"}):
        res = _sign_in(client, world["p_token"], **headers)
        assert res.status_code == 403 and res.json()["error"]["field"] == "Origin", headers
    form = client.post(f"{API}/session", data={"token": world["p_token"]})  # what an HTML form sends
    assert form.status_code == 415 and form.json()["error"]["field"] == "Content-Type"  # docs/api.md
    assert COOKIE not in client.cookies
    plain = client.post(f"{API}/session", content=f'{{"token": "{world["p_token"]}"}}',
                        headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415 and plain.json()["error"]["field"] == "Content-Type"
    assert COOKIE not in client.cookies
    assert _sign_in(client, world["p_token"], **{"Sec-Fetch-Site": "same-origin",
                                                 "Origin": "http://testserver"}).status_code == 200
    refused = client.delete(f"{API}/session", headers={"Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403
    assert client.get(f"{API}/session").status_code == 200  # still signed in


def test_failed_sign_ins_are_rate_limited_per_address(client, world, monkeypatch):
    monkeypatch.setattr(client.app.state.context.settings, "signin_rate_limit", 3)  # the app's settings
    for _ in range(3):
        assert _sign_in(client, "rc_guess").status_code == 401
    res = _sign_in(client, world["p_token"])
    assert res.status_code == 429 and int(res.headers["retry-after"]) >= 1
    assert COOKIE not in client.cookies


def test_the_stream_of_a_private_run_follows_the_cookie_live_and_replayed(client, world):
    async def scenario(url: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=30) as browser, httpx.AsyncClient(
            base_url=url, timeout=30) as stranger:
            writer = RunWriter(httpx.Client(base_url=url, timeout=30), world["p_token"], project="pproj")
            writer.start(visibility="private")
            writer.batch(steps=3)
            stream = f"{API}/runs/{writer.run}/stream"
            assert (await stranger.get(stream)).status_code == 404
            assert (await browser.post(f"{API}/session", json={"token": world["p_token"]})).status_code == 200
            await _sign_in_stranger(stranger, world["q_token"])
            assert (await stranger.get(stream)).status_code == 404  # q's session
            # Replay from version 0 with Last-Event-ID, then one live batch.
            async with browser.stream("GET", stream, headers={"Last-Event-ID": "0"}) as response:
                assert response.status_code == 200
                got = []
                async for message in sse(response):
                    if message.event == "batch":
                        got.append(message)
                        if len(got) == 2:
                            await asyncio.to_thread(writer.batch, 3)
                        if len(got) == 3:
                            break
            points = points_of(got)
            assert sorted(points) == sorted((k, s, st, v) for (k, s, st), v in writer.expected.items())
            assert len(points) == len(set(points)) == 12
            writer.api.close()

    with LiveServer(client.app) as server:
        asyncio.run(asyncio.wait_for(scenario(server.url), 60))


async def _sign_in_stranger(http: httpx.AsyncClient, token: str) -> None:
    assert (await http.post(f"{API}/session", json={"token": token})).status_code == 200


def test_no_shared_cache_keeps_what_a_session_saw(client, world):
    """Answers to a signed-in browser on the data paths say Vary: Cookie and are private; what
    everyone gets (pages, files, anonymous reads) is unchanged."""
    anonymous = _browser(client)
    assert _sign_in(client, world["p_token"]).status_code == 200
    private = world["private"]
    for path in (f"{API}/runs", f"{API}/runs/{private}", f"{API}/runs/{private}/metrics?key=loss",
                 f"{API}/runs/{private}/export", f"/badge/runs/{private}.svg", f"{API}/session"):
        res = client.get(path)
        assert res.status_code == 200, path
        assert "private" in res.headers["cache-control"], path
        assert "cookie" in res.headers["vary"].lower(), path
    public_list = anonymous.get(f"{API}/runs")
    assert "cache-control" not in public_list.headers and "cookie" not in public_list.headers.get("vary", "").lower()
    page = client.get("/")
    assert page.headers["cache-control"] == "no-cache" and "cookie" not in page.headers["vary"].lower()

