"""People from the browser's seat: local accounts sign in with a password; a member reads the
project's private run and manages it from this site's pages, a viewer reads and cannot manage,
someone without a role finds nothing (404, as another project's token); an owner manages the
members; a cross-site write with the session cookie is refused; no session ever ingests; a wrong
name and a wrong password answer the same and are rate-limited; passwords are stored as argon2id."""

from __future__ import annotations

from typing import Any

import pytest
from backend.helpers import metrics
from fastapi.testclient import TestClient
from runcast_server.core.auth import get_or_create_project
from runcast_server.people import service as people
from sqlalchemy import text

API = "/api/v1"
SAME = {"Sec-Fetch-Site": "same-origin"}
PASSWORD = "correct horse battery"


@pytest.fixture
def world(client: Any, seed: Any, db: Any) -> dict[str, Any]:
    private = seed.run("pp", name="secret").start(visibility="private")
    private.log({"loss": [(1, 2.0), (2, 1.5)]})
    theirs = seed.run("qq", name="theirs").start(visibility="private")
    with db.scope() as session:
        for name in ("ada", "vic", "ola", "zed"):
            people.create_user(session, name, display_name=name.title(), password=PASSWORD)
        project = get_or_create_project(session, "pp")
        people.grant(session, project, people.find_user(session, "ada"), "member")  # type: ignore[arg-type]
        people.grant(session, project, people.find_user(session, "vic"), "viewer")  # type: ignore[arg-type]
        people.grant(session, project, people.find_user(session, "ola"), "owner")  # type: ignore[arg-type]
    return {"run": private.run, "segment": private.segment, "theirs": theirs.run, "p_token": seed.token("pp")}


def _browser(client: Any, name: str | None = None) -> TestClient:
    browser = TestClient(client.app)
    if name is not None:
        res = browser.post(f"{API}/session/password", json={"name": name, "password": PASSWORD}, headers=SAME)
        assert res.status_code == 200, res.text
    return browser


def _name(client: Any, run: str, token: str) -> str:
    return client.get(f"{API}/runs/{run}", headers={"Authorization": f"Bearer {token}"}).json()["name"]


def test_a_local_account_signs_in_and_the_session_names_the_person(client: Any, world: dict[str, Any]) -> None:
    browser = _browser(client)
    res = browser.post(f"{API}/session/password", json={"name": "ada", "password": PASSWORD}, headers=SAME)
    assert res.status_code == 200, res.text
    header = res.headers["set-cookie"].lower()
    assert "httponly" in header and "samesite=strict" in header
    body = browser.get(f"{API}/session").json()
    assert body["project"] is None and body["user"]["name"] == "ada" and body["user"]["display_name"] == "Ada"
    assert body["user"]["roles"] == [{"project": "pp", "role": "member"}]
    assert browser.delete(f"{API}/session", headers=SAME).status_code == 200
    assert browser.get(f"{API}/session").status_code == 401


def test_roles_read_and_manage_the_projects_private_run(client: Any, world: dict[str, Any]) -> None:
    run = world["run"]
    member, viewer, stranger = _browser(client, "ada"), _browser(client, "vic"), _browser(client, "zed")
    anonymous = _browser(client)
    for who in (member, viewer):
        assert who.get(f"{API}/runs/{run}").status_code == 200
        assert who.get(f"{API}/runs/{run}/metrics", params={"key": "loss"}).status_code == 200
        assert who.get(f"{API}/runs/{run}/policy").status_code == 200
    for who in (stranger, anonymous):
        assert who.get(f"{API}/runs/{run}").status_code == 404
    assert stranger.get(f"{API}/runs/{world['theirs']}").status_code == 404
    assert member.get(f"{API}/runs/{world['theirs']}").status_code == 404
    # The runs list of the project shows its private run to a member (?project=), not to a stranger.
    assert run in [r["id"] for r in member.get(f"{API}/runs", params={"project": "pp"}).json()["runs"]]
    assert run not in [r["id"] for r in stranger.get(f"{API}/runs", params={"project": "pp"}).json()["runs"]]

    refused = viewer.patch(f"{API}/runs/{run}", json={"name": "by viewer"}, headers=SAME)
    assert refused.status_code == 403 and refused.json()["error"]["field"] == "runcast_session"
    assert "viewer" in refused.json()["error"]["message"]
    assert stranger.patch(f"{API}/runs/{run}", json={"name": "by stranger"}, headers=SAME).status_code == 404
    assert anonymous.patch(f"{API}/runs/{run}", json={"name": "anon"}, headers=SAME).status_code == 401
    assert viewer.put(f"{API}/runs/{run}/policy", json={"notes": "hidden"}, headers=SAME).status_code == 403
    assert viewer.delete(f"{API}/runs/{run}", headers=SAME).status_code == 403
    assert _name(client, run, world["p_token"]) == "secret"

    res = member.patch(f"{API}/runs/{run}", json={"name": "by member"}, headers=SAME)
    assert res.status_code == 200, res.text
    assert _name(client, run, world["p_token"]) == "by member"
    assert member.put(f"{API}/projects/pp/policy", json={"notes": "hidden"}, headers=SAME).status_code == 200
    assert member.put(f"{API}/projects/qq/policy", json={"notes": "hidden"}, headers=SAME).status_code == 404
    assert member.patch(f"{API}/runs/{world['theirs']}", json={"name": "x"}, headers=SAME).status_code == 404
    # Tokens are managed with tokens only; no session ever ingests.
    assert member.get(f"{API}/tokens").status_code == 401
    ingest = member.post(f"{API}/ingest", json={"v": 1, "events": [metrics(5, {"loss": 1.0}, run=run)]},
                         headers=SAME)
    assert ingest.status_code == 401


def test_a_cross_site_write_with_the_session_cookie_is_refused(client: Any, world: dict[str, Any]) -> None:
    run, member = world["run"], _browser(client, "ada")
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                    {"Origin": "https://evil.example"}):
        res = member.patch(f"{API}/runs/{run}", json={"name": "csrf"}, headers=headers)
        assert res.status_code == 403 and res.json()["error"]["field"] == "Origin", res.text
        assert member.delete(f"{API}/runs/{run}", headers=headers).status_code == 403
        assert member.put(f"{API}/projects/pp/members/zed", json={"role": "owner"}, headers=headers).status_code == 403
    assert _name(client, run, world["p_token"]) == "secret"
    assert client.get(f"{API}/runs/{run}", headers={"Authorization": f"Bearer {world['p_token']}"}).status_code == 200
    # A login CSRF (signing the victim in as the attacker) is refused too.
    res = _browser(client).post(f"{API}/session/password", json={"name": "zed", "password": PASSWORD},
                                headers={"Sec-Fetch-Site": "cross-site"})
    assert res.status_code == 403


def test_owners_manage_members_and_nobody_else_does(client: Any, world: dict[str, Any]) -> None:
    owner, member, stranger = _browser(client, "ola"), _browser(client, "ada"), _browser(client, "zed")
    listed = owner.get(f"{API}/projects/pp/members").json()
    assert [(m["name"], m["role"]) for m in listed["members"]] == [("ada", "member"), ("ola", "owner"),
                                                                   ("vic", "viewer")]
    assert member.get(f"{API}/projects/pp/members").status_code == 403
    assert member.put(f"{API}/projects/pp/members/zed", json={"role": "owner"}, headers=SAME).status_code == 403
    assert stranger.get(f"{API}/projects/pp/members").status_code == 404
    assert owner.get(f"{API}/projects/qq/members").status_code == 404
    bad = owner.put(f"{API}/projects/pp/members/zed", json={"role": "admin"}, headers=SAME)
    assert bad.status_code == 422 and bad.json()["error"]["field"].endswith("role")
    assert owner.put(f"{API}/projects/pp/members/nobody", json={"role": "viewer"}, headers=SAME).status_code == 404
    res = owner.put(f"{API}/projects/pp/members/zed", json={"role": "viewer"}, headers=SAME)
    assert res.status_code == 200 and ("zed", "viewer") in [(m["name"], m["role"]) for m in res.json()["members"]]
    assert stranger.get(f"{API}/runs/{world['run']}").status_code == 200  # zed reads now
    assert owner.delete(f"{API}/projects/pp/members/zed", headers=SAME).status_code == 200
    assert stranger.get(f"{API}/runs/{world['run']}").status_code == 404


def test_wrong_name_or_password_answer_alike_and_are_rate_limited(client: Any, db: Any, world: dict[str, Any],
                                                                  monkeypatch: Any) -> None:
    browser = _browser(client)
    wrong_password = browser.post(f"{API}/session/password", json={"name": "ada", "password": "nope-nope"},
                                  headers=SAME)
    no_such_user = browser.post(f"{API}/session/password", json={"name": "nobody", "password": "nope-nope"},
                                headers=SAME)
    assert wrong_password.status_code == no_such_user.status_code == 401
    assert wrong_password.json() == no_such_user.json() == {
        "error": {"message": "wrong name or password", "field": "password"}}
    assert "runcast_session" not in browser.cookies
    monkeypatch.setattr(client.app.state.context.settings, "signin_rate_limit", 4)
    limited = browser.post(f"{API}/session/password", json={"name": "ada", "password": "x"}, headers=SAME)
    assert limited.status_code == 401  # the 3rd attempt
    assert browser.post(f"{API}/session/password", json={"name": "ada", "password": "x"},
                        headers=SAME).status_code == 401
    res = browser.post(f"{API}/session/password", json={"name": "ada", "password": PASSWORD}, headers=SAME)
    assert res.status_code == 429 and int(res.headers["retry-after"]) >= 1
    with db.engine.connect() as conn:
        hashes = conn.execute(text("SELECT password_hash FROM users")).scalars().all()
        sessions = conn.execute(text("SELECT session_hash FROM user_sessions")).scalars().all()
    assert hashes and all(h.startswith("$argon2id$") and PASSWORD not in h for h in hashes)
    assert all(len(h) == 64 for h in sessions)  # SHA-256 of the cookie, never the cookie


def test_the_project_token_session_still_reads_and_never_writes(client: Any, world: dict[str, Any]) -> None:
    browser = _browser(client)
    assert browser.post(f"{API}/session", json={"token": world["p_token"]}, headers=SAME).status_code == 200
    assert browser.get(f"{API}/runs/{world['run']}").status_code == 200
    assert browser.patch(f"{API}/runs/{world['run']}", json={"name": "x"}, headers=SAME).status_code == 401


def test_the_unknown_name_dummy_costs_what_a_real_password_does() -> None:
    """passwords._DUMMY is a literal: it must stay a hash of today's parameters (argon2-cffi's
    defaults), or a wrong name would answer faster than a wrong password."""
    from runcast_server.people import passwords

    assert not passwords.needs_rehash(passwords._DUMMY)
    assert passwords.verify(None, "runcast: no such user") is False
    assert passwords.verify(passwords.hash_password("a long passphrase"), "a long passphrase") is True
