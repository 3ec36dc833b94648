"""Tenants are walls: a token of project q can neither write, read nor serve anything of project
p's private runs, by run id, by checkpoint id, by path, or by probing status codes.

Every route of the app is walked (``iter_route_contexts``), so a new route is tested the day
it is added: one that names a run is asked for p's private run and for an unknown id, anonymous
and with q's token, and both full responses (status and body) must be equal. A route that names
no run must be listed in ``NO_RUN`` with the reason it cannot reach one.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from typing import Any

import httpx
import pytest
from artifacts.live import LiveServer
from fastapi.routing import APIRoute, iter_route_contexts
from runcast.wire.events import EVENT_TYPES
from stream.helpers import sse

UNKNOWN = "unknownrun000000"  # a well-formed id of no run

# Routes that take no run id, and where each is checked (every one is, below or elsewhere).
NO_RUN = {
    "/api/v1/ingest": "writes: test_ingest_into_another_projects_run_answers_as_unknown",
    "/api/v1/whoami": "a token's own project: test_whoami_tells_only_the_tokens_own_project",
    "/api/v1/runs": "the list: test_run_list_never_shows_another_projects_private_runs",
    "/api/v1/subscriptions": "test_subscribing_to_a_private_run_answers_as_unknown",
    "/api/v1/projects/{project}/alerts.atom": "public runs only: tests/alerts",
    "/api/v1/projects/{project}/policy": "the token's own project only: tests/api/test_policy.py",
    "/api/v1/subscriptions/confirm": "a capability token, no run",
    "/api/v1/subscriptions/unsubscribe": "a capability token, no run",
    "/api/v1/storage": "what the storage offers uploads: no project's data",
    "/api/v1/subscriptions/{subscription_id}": "a capability token, no run",
    "/api/v1/estimate": "no data",
    "/api/v1/session": "the caller's own session: test_a_session_reads_as_its_projects_token_on_every_read_route",
    "/api/v1/session/password": "the caller's own session: tests/api/test_people.py",
    "/api/v1/session/providers": "the configured providers: no project's data",
    "/api/v1/session/oidc/{provider}/login": "a redirect to the provider: tests/browser/test_oidc.py",
    "/api/v1/session/oidc/{provider}/callback": "the provider's answer: tests/browser/test_oidc.py",
    "/api/v1/projects/{project}/members": "its owners and team tokens only: tests/api/test_people.py, test_scopes.py",
    "/api/v1/projects/{project}/members/{user}": "its owners and team tokens only: tests/api/test_people.py",
    "/api/v1/tokens": "the presented token's own project only: tests/api/test_manage.py",
    "/api/v1/tokens/{token_id}": "the presented token's own project only: tests/api/test_manage.py",
    "/api/v1/admin/inbox": "an admin token only: tests/backend/test_inbox.py",
    "/api/v1/admin/inbox/stats": "an admin token only: tests/backend/test_inbox.py",
    "/api/v1/admin/inbox/{inbox_id}": "an admin token only: tests/backend/test_inbox.py",
    "/api/v1/admin/inbox/{inbox_id}/retry": "an admin token only: tests/backend/test_inbox.py",
    "/healthz": "no data",
    "/readyz": "no data",
    "/metrics": "aggregate counts, no run id or project: tests/integration/test_operations.py",
    "/compare": "static page",
    "/": "static page",
    "/vendor/{name}": "static file",
    "/vendor/{digest}/{name}": "static file",
}
CODE = {"sha": "1" * 40, "branch": "main", "remote": "https://example.com/p/repo", "dirty": True,
        "diff": "diff --git a/secret.py b/secret.py\n+p's secret change\n", "diff_truncated": False}


def _write(path: Any, data: bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def world(settings: Any, client: Any, seed: Any) -> dict[str, Any]:
    """Project p: a private run with every artifact, and a public run with a private checkpoint.
    Project q: a public run whose checkpoint events name p's files, directly and through a link."""
    root = settings.checkpoint_root
    secret_sha = _write(root / "pproj" / "secret.pt", b"p's private weights")
    hidden_sha = _write(root / "pproj" / "hidden.pt", b"p's hidden checkpoint")
    (root / "qproj").mkdir(parents=True)
    os.symlink(root / "pproj" / "secret.pt", root / "qproj" / "link.pt")

    private = seed.run("pproj", name="private").start(visibility="private", code=CODE, config={"lr": 1})
    private.log({"loss": [(1, 2.0), (2, 1.5)]})
    private.send([
        private.event("checkpoint", step=2, path="pproj/secret.pt", size=19, sha256=secret_sha),
        private.event("manifest", step=1, version="v1", manifest={"files": [{"name": "secret.jsonl"}]}),
        private.event("manifest", step=2, version="v2", manifest={"files": [{"name": "secret2.jsonl"}]}),
        private.event("data_mix", step=1, weights={"web": 1.0}),
        private.event("note", step=2, text="p's private note"),
        private.sample(2, "p-secret", "p's private generation", prompt="p's private prompt"),
        private.evaluation(2, "p-task", {"acc": 0.9}, checkpoint=2),
        private.media(2, "p-table", "table", columns=["secret"], rows=[["p's cell"]]),
        private.media(2, "p-image", "image", blob=seed.blob("pproj", b"p's image"), content_type="image/png",
                      width=1, height=1, size=9),
    ])
    public = seed.run("pproj", name="public").start()
    public.log({"loss": [(1, 2.0)]})
    public.send([public.event("checkpoint", step=1, path="pproj/hidden.pt", size=21, sha256=hidden_sha, public=False)])
    q = seed.run("qproj", name="q").start()
    q.send([
        q.event("checkpoint", step=1, path="pproj/secret.pt", size=19, sha256=secret_sha),
        q.event("checkpoint", step=2, path=str(root / "pproj" / "secret.pt"), size=19, sha256=secret_sha),
        q.event("checkpoint", step=3, path="qproj/link.pt", size=19, sha256=secret_sha),
        q.event("checkpoint", step=4, path="pproj/no-such-file.pt", size=19, sha256=secret_sha),
    ])
    p_token, q_token = seed.token("pproj"), seed.token("qproj")
    cookies = {}
    for name, token in (("p_cookie", p_token), ("q_cookie", q_token)):
        client.cookies.clear()  # a second browser (signing in again would end the first session)
        signed_in = client.post("/api/v1/session", json={"token": token})
        assert signed_in.status_code == 200
        cookies[name] = {"Cookie": f"runcast_session={signed_in.cookies['runcast_session']}"}
    client.cookies.clear()  # each request below says which cookie it carries
    auth = {"Authorization": f"Bearer {p_token}"}
    ids = {
        "cid": client.get(f"/api/v1/runs/{private.run}/checkpoints", headers=auth).json()["checkpoints"][0]["id"],
        "rid": client.get(f"/api/v1/runs/{private.run}/revisions", headers=auth).json()["revisions"][0]["id"],
        "hidden_cid": client.get(f"/api/v1/runs/{public.run}/checkpoints", headers=auth).json()["checkpoints"][0]["id"],
        "sid": client.get(f"/api/v1/runs/{private.run}/samples", headers=auth).json()["samples"][0]["id"],
    }
    return {"private": private.run, "public": public.run, "q": q.run, "p_token": p_token, "q_token": q_token,
            "secret_sha": secret_sha, "hidden_sha": hidden_sha, **ids, **cookies}


def _strangers(world: dict[str, Any]) -> tuple[dict[str, str], ...]:
    """Anonymous, q's token, q's dashboard session (sessions/)."""
    return {}, {"Authorization": f"Bearer {world['q_token']}"}, world["q_cookie"]


def _routes(client: Any) -> list[tuple[str, str]]:
    out = []
    for route in iter_route_contexts(client.app.routes):
        if isinstance(route.original_route, APIRoute) or route.methods:
            for method in sorted(route.methods or ()):
                out.append((method, route.path_format))
    return out


def _fill(path: str, run: str, world: dict[str, Any]) -> str:
    return (path.replace("{run_id}", run).replace("{cid}", str(world["cid"])).replace("{rid}", str(world["rid"]))
            .replace("{version}", "v1").replace("{upload_id}", "0" * 32).replace("{index}", "0")
            .replace("{file_path}", "a.bin").replace("{segment}", "segment00").replace("{sha256}", "ab" * 32)
            .replace("{media_id}", "1").replace("{sample_id}", str(world["sid"])).replace("{comment_id}", "1"))


def _normalised(res: Any, *ids: str) -> tuple[int, str]:
    body = res.text
    for value in ids:
        body = body.replace(value, "<RUN>")
    return res.status_code, body


def test_every_route_answers_for_a_private_run_exactly_as_for_an_unknown_id(client, world):
    routes = _routes(client)
    run_routes = [(m, p) for m, p in routes if "{run_id}" in p]
    unclassified = {p for m, p in routes if "{run_id}" not in p} - set(NO_RUN) - {
        "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
    assert not unclassified, f"routes without a run id must say how they are walled: {unclassified}"
    assert len(run_routes) >= 20
    params = {"key": "loss", "from": "v1", "to": "v2"}
    checked = 0
    for method, path in run_routes:
        for headers in _strangers(world):
            kwargs: dict[str, Any] = {"params": params, "headers": headers}
            if method == "PUT":
                kwargs["json"] = {"events": 1} if path.endswith("/spool") else {"spike": {"k": 5}}
            if method == "PATCH":
                kwargs["json"] = {"name": "renamed", "archived": True}
            private = client.request(method, _fill(path, world["private"], world), **kwargs)
            unknown = client.request(method, _fill(path, UNKNOWN, world), **kwargs)
            assert _normalised(private, world["private"]) == _normalised(unknown, UNKNOWN), (method, path, headers)
            if path.startswith("/api/"):  # a write without a token is refused before any lookup
                token_only = method in ("PUT", "POST", "PATCH", "DELETE") or path.endswith("/policy") or "/blobs/" in path
                expected = 401 if token_only and "Authorization" not in headers else 404
                assert private.status_code == expected, (method, path, private.status_code)
            checked += 1
    # p's own token reads it (the test would pass vacuously if the run were unreadable to everyone).
    mine = client.get(f"/api/v1/runs/{world['private']}", headers={"Authorization": f"Bearer {world['p_token']}"})
    assert mine.status_code == 200 and mine.json()["config"] == {"lr": 1}
    assert checked >= 40


def test_another_projects_checkpoint_id_answers_as_unknown_on_every_checkpoint_route(client, world):
    """p's checkpoint id under q's public run, and p's private checkpoint under p's public run."""
    routes = [(m, p) for m, p in _routes(client) if "{cid}" in p]
    assert len(routes) >= 3
    for method, path in routes:
        for headers in ({}, {"Authorization": f"Bearer {world['q_token']}"}):
            for run, cid in ((world["q"], world["cid"]), (world["public"], world["hidden_cid"])):
                url = path.replace("{run_id}", run)
                theirs = client.request(method, url.replace("{cid}", str(cid)), headers=headers)
                unknown = client.request(method, url.replace("{cid}", "999999"), headers=headers)
                assert (theirs.status_code, theirs.text) == (unknown.status_code, unknown.text), (method, url)
                assert theirs.status_code == 404
    auth = {"Authorization": f"Bearer {world['p_token']}"}
    res = client.get(f"/api/v1/runs/{world['public']}/checkpoints/{world['hidden_cid']}/download", headers=auth)
    assert res.status_code == 200 and hashlib.sha256(res.content).hexdigest() == world["hidden_sha"]


def test_a_checkpoint_event_cannot_serve_another_projects_file(settings: Any, client, world):
    """q's events name p's file (relative, absolute, through a link in q's directory, and a
    file that does not exist): each is missing with the same reason, and nothing is served."""
    for headers in _strangers(world):
        listed = client.get(f"/api/v1/runs/{world['q']}/checkpoints", headers=headers).json()["checkpoints"]
        assert [c["status"] for c in listed] == ["missing"] * 4
        reasons = {c["step"]: c["reason"] for c in listed}
        # An existing file and a missing one of p's directory are told apart by nothing.
        assert reasons[1] == reasons[2] == reasons[4] == "refused: outside the project's directory of the storage root"
        assert reasons[3] == "refused: path leaves the project's directory through a symbolic link"
        for c in listed:
            assert c["download_url"] is None
            res = client.get(f"/api/v1/runs/{world['q']}/checkpoints/{c['id']}/download", headers=headers)
            assert res.status_code == 404 and b"private weights" not in res.content
            assert str(settings.checkpoint_root) not in res.text


def test_a_private_checkpoints_file_is_shown_only_to_its_project(client, world):
    run = world["public"]
    for headers in _strangers(world):
        (event,) = client.get(f"/api/v1/runs/{run}/events", params={"type": "checkpoint"}, headers=headers).json()[
            "events"]
        assert event["payload"] == {"metrics": {}, "public": False, "status": "available"}
        (listed,) = client.get(f"/api/v1/runs/{run}/checkpoints", headers=headers).json()["checkpoints"]
        assert listed["status"] == "private"
        assert (listed["size"], listed["sha256"], listed["filename"], listed["download_url"]) == (None,) * 4
        body = client.get(f"/api/v1/runs/{run}/checkpoints", headers=headers).text
        assert "hidden" not in body and world["hidden_sha"] not in body
    auth = {"Authorization": f"Bearer {world['p_token']}"}
    (event,) = client.get(f"/api/v1/runs/{run}/events", params={"type": "checkpoint"}, headers=auth).json()["events"]
    assert (event["payload"]["path"], event["payload"]["size"]) == ("pproj/hidden.pt", 21)


def test_the_live_stream_never_carries_a_private_checkpoints_file(client, world):
    async def first_batches(url: str) -> list[Any]:
        async with httpx.AsyncClient(timeout=30) as http, http.stream(
            "GET", f"{url}/api/v1/runs/{world['public']}/stream", params={"last_event_id": "0"}
        ) as response:
            assert response.status_code == 200
            out = []
            async for message in sse(response):
                if message.event == "batch":
                    out.append(message.data)
                    if any(e["type"] == "checkpoint" for e in message.data["events"]):
                        return out
            return out

    with LiveServer(client.app) as server:
        batches = asyncio.run(asyncio.wait_for(first_batches(server.url), 30))
    (event,) = [e for b in batches for e in b["events"] if e["type"] == "checkpoint"]
    assert event["payload"] == {"metrics": {}, "public": False, "status": "available"}
    assert "hidden" not in json.dumps(batches)


def test_ingest_into_another_projects_run_answers_as_unknown(client, world, seed):
    q_auth = {"Authorization": f"Bearer {world['q_token']}"}

    def metrics(run: str) -> dict[str, Any]:
        return {"v": 1, "events": [{"v": 1, "type": "metrics", "run": run, "segment": "segment00000001", "seq": 0,
                                    "ts": 1.0, "step": 3, "values": {"loss": 9.0}}]}

    for run in (world["private"], world["public"]):
        theirs = client.post("/api/v1/ingest", json=metrics(run), headers=q_auth)
        unknown = client.post("/api/v1/ingest", json=metrics(UNKNOWN), headers=q_auth)
        assert _normalised(theirs, run) == _normalised(unknown, UNKNOWN)
        assert theirs.status_code == 404
    # Writes of the detector configuration: as unknown too.
    for run in (world["private"], world["public"]):
        theirs = client.put(f"/api/v1/runs/{run}/alerts/config", json={"spike": {"k": 5}}, headers=q_auth)
        unknown = client.put(f"/api/v1/runs/{UNKNOWN}/alerts/config", json={"spike": {"k": 5}}, headers=q_auth)
        assert (theirs.status_code, theirs.text) == (unknown.status_code, unknown.text) == (404, theirs.text)
    p_auth = {"Authorization": f"Bearer {world['p_token']}"}
    assert client.get(f"/api/v1/runs/{world['private']}/metrics", params={"key": "loss"},
                      headers=p_auth).json()["series"][0]["step"] == [1, 2]  # nothing of q's written


def test_run_list_never_shows_another_projects_private_runs(client, world):
    for headers in _strangers(world):
        for params in ({}, {"project": "pproj"}):
            ids = [r["id"] for r in client.get("/api/v1/runs", params=params, headers=headers).json()["runs"]]
            assert world["private"] not in ids and world["public"] in ids
    for mine in ({"Authorization": f"Bearer {world['p_token']}"}, world["p_cookie"]):
        assert world["private"] in [r["id"] for r in client.get("/api/v1/runs", headers=mine).json()["runs"]]


def test_subscribing_to_a_private_run_answers_as_unknown(client, world):
    body = {"channel": "webhook", "url": "https://example.com/hook"}
    for headers in (*_strangers(world), world["p_cookie"]):  # a cookie never authorises a write
        theirs = client.post("/api/v1/subscriptions", json={**body, "run": world["private"]}, headers=headers)
        unknown = client.post("/api/v1/subscriptions", json={**body, "run": UNKNOWN}, headers=headers)
        assert (theirs.status_code, theirs.text) == (unknown.status_code, unknown.text)
        assert theirs.status_code == 404


def test_whoami_tells_only_the_tokens_own_project(client, world):
    """whoami answers the token's own project and its own runs' last step; another project's run id
    is a 409 (as a run_started for it is at ingest), and nothing of that run is shown."""
    p_auth = {"Authorization": f"Bearer {world['p_token']}"}
    q_auth = {"Authorization": f"Bearer {world['q_token']}"}
    mine = client.get("/api/v1/whoami", params={"run": world["private"]}, headers=p_auth)
    assert mine.status_code == 200
    assert mine.json() == {"project": "pproj", "scopes": ["read", "ingest", "team"],
                           "run": {"id": world["private"], "last_step": 2, "status": "running"},
                           "max_batch_events": 20_000, "event_types": list(EVENT_TYPES), "max_body_bytes": 8 * 1024 * 1024}
    theirs = client.get("/api/v1/whoami", params={"run": world["private"]}, headers=q_auth)
    assert theirs.status_code == 409 and theirs.json()["error"]["field"] == "run"
    assert "last_step" not in theirs.text and "pproj" not in theirs.text
    assert client.get("/api/v1/whoami", params={"run": UNKNOWN}, headers=q_auth).json() == {
        "project": "qproj", "scopes": ["read", "ingest", "team"], "run": None, "max_batch_events": 20_000,
        "event_types": list(EVENT_TYPES), "max_body_bytes": 8 * 1024 * 1024}
    for headers in ({}, {"Authorization": "Bearer rc_not_a_token"}):
        refused = client.get("/api/v1/whoami", params={"run": world["private"]}, headers=headers)
        assert refused.status_code == 401 and refused.json()["error"]["field"] == "Authorization"
    assert client.get("/api/v1/whoami", params={"run": "bad id!"}, headers=q_auth).status_code == 422


def test_a_session_reads_as_its_projects_token_on_every_read_route(client, world):
    """Every GET route that names a run answers p's session cookie as it answers p's token (the
    stream is followed live in tests/api/test_signin.py); every write refuses the cookie alone."""
    params = {"key": "loss", "from": "v1", "to": "v2"}
    token = {"Authorization": f"Bearer {world['p_token']}"}
    readable = 0
    for method, path in _routes(client):
        if "{run_id}" not in path or path.endswith("/stream"):
            continue
        url = _fill(path, world["private"], world)
        if (path.endswith("/policy") or "/blobs/" in path) and method in ("GET", "HEAD"):  # token-only, as /tokens
            assert client.request(method, url, headers=world["p_cookie"]).status_code == 401
            continue
        if path.endswith(("/comment-reports", "/comments/{comment_id}/versions")):  # the team's moderation reads
            assert client.request(method, url, headers=world["p_cookie"]).status_code == 403
            continue
        by_cookie = client.request(method, url, params=params, headers=world["p_cookie"])
        if method in ("GET", "HEAD"):
            by_token = client.request(method, url, params=params, headers=token)
            assert by_cookie.status_code == by_token.status_code, (method, path, by_cookie.text)
            readable += by_cookie.status_code == 200
        else:
            assert by_cookie.status_code == 401, (method, path, by_cookie.status_code)
    assert readable >= 20
    assert client.get("/api/v1/session", headers=world["q_cookie"]).json()["project"] == "qproj"

