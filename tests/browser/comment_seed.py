"""Comments on a run made as their writers make them (local accounts signed in over the API,
docs/comments.md), for the pages' walks: a thread on a step with the team's reply, an edited
reply, a reported comment, a held one (the team holds new comments) and a thread on an alert."""

from __future__ import annotations

from typing import Any

import httpx

from .test_oidc import _runcast

PASSWORD = "a long passphrase"
WRITER, TEAM = "ada", "mia"  # a signed-in person, and a member of the run's project


def signed_in(url: str, name: str) -> httpx.Client:
    client = httpx.Client(base_url=url, headers={"Origin": url}, timeout=10)  # a write from this site's pages
    res = client.post("/api/v1/session/password", json={"name": name, "password": PASSWORD})
    assert res.status_code == 200, res.text
    return client


def seed_comments(server: Any, project: str, run_id: str, key: str, step: int, alert_id: int | None) -> None:
    """Make the comments; ``mia`` (a member of ``project``) and ``ada`` sign in with ``PASSWORD``."""
    for name, display in ((WRITER, "Ada L."), (TEAM, "Mia K.")):
        _runcast(server, "user", "create", name, "--display-name", display, "--password-stdin", stdin=PASSWORD + "\n")
    _runcast(server, "project", "grant", project, TEAM, "--role", "member")
    ada, mia = signed_in(server.url, WRITER), signed_in(server.url, TEAM)
    comments = f"/api/v1/runs/{run_id}/comments"

    def post(who: httpx.Client, **body: Any) -> int:
        res = who.post(comments, json=body)
        assert res.status_code == 201, res.text
        return int(res.json()["id"])

    head = post(ada, body="Why the **bump** here?", anchor={"kind": "step", "key": key, "step": step})
    post(mia, body="A data-mix change.", parent=head)
    mine = post(ada, body="Thanks", parent=head)
    assert ada.patch(f"{comments}/{mine}", json={"body": "Thanks!"}).status_code == 200
    assert ada.post(f"{comments}/{post(mia, body='See the note.', parent=head)}/reports", json={"reason": "off topic"}).status_code == 202
    assert mia.post(f"{comments}/{head}/moderation", json={"pinned": True}).status_code == 200
    if alert_id is not None:
        post(ada, body="Is this real?", anchor={"kind": "alert", "id": alert_id})
    assert mia.put(f"/api/v1/runs/{run_id}/comment-settings", json={"hold": True}).status_code == 200
    post(ada, body="And at step 201?", parent=head)  # held: seen by its writer and the team
    ada.close()
    mia.close()
