"""Comments from the seats of their users: a signed-in person comments on a step of a public run,
replies, edits (the team keeps the former text) and deletes; the team answers, pins, hides, locks
and approves held comments, reads reports; a viewer, a ``read`` token, a stranger and another
project's token cannot moderate; another project's private run is not found; a cross-site write
is refused; a flood is answered 429 with Retry-After; hostile Markdown is neutralised."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from fastapi.testclient import TestClient
from runcast_server.core.auth import create_token, get_or_create_project
from runcast_server.people import service as people
from sqlalchemy import text

API = "/api/v1"
SAME = {"Sec-Fetch-Site": "same-origin"}
PASSWORD = "correct horse battery"


@pytest.fixture
def world(client: Any, seed: Any, db: Any) -> dict[str, Any]:
    public = seed.run("pp", name="open").start()
    public.log({"loss": [(1, 2.0), (2, 1.5), (3, 1.2)], "secret": [(1, 9.0)]})
    private = seed.run("pp", name="closed").start(visibility="private")
    private.log({"loss": [(1, 2.0)]})
    theirs = seed.run("qq", name="theirs").start(visibility="private")
    theirs.log({"loss": [(1, 2.0)]})
    with db.scope() as session:
        for name in ("ada", "vic", "zed", "eve"):
            people.create_user(session, name, display_name=name.title(), password=PASSWORD)
        project = get_or_create_project(session, "pp")
        people.grant(session, project, people.find_user(session, "ada"), "member")  # type: ignore[arg-type]
        people.grant(session, project, people.find_user(session, "vic"), "viewer")  # type: ignore[arg-type]
        tokens = {scope: create_token(session, "pp", label=scope, scopes=[scope]) for scope in ("read", "team")}
        tokens["qq"] = create_token(session, "qq", label="qq", scopes=["read", "team"])
    return {"run": public.run, "private": private.run, "theirs": theirs.run, "tokens": tokens}


def browser(client: Any, name: str | None = None) -> TestClient:
    b = TestClient(client.app)
    if name is not None:
        res = b.post(f"{API}/session/password", json={"name": name, "password": PASSWORD}, headers=SAME)
        assert res.status_code == 200, res.text
    return b


def step(key: str = "loss", at: int = 2) -> dict[str, Any]:
    return {"kind": "step", "key": key, "step": at}


def post(who: TestClient, run: str, body: str, **kw: Any) -> Any:
    return who.post(f"{API}/runs/{run}/comments", json={"body": body, **kw}, headers=SAME)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_person_comments_on_a_step_and_everyone_reads_it(client: Any, world: dict[str, Any]) -> None:
    zed, anonymous = browser(client, "zed"), browser(client)
    made = post(zed, world["run"], "Why the **bump** here?", anchor=step())
    assert made.status_code == 201, made.text
    c = made.json()
    assert c["anchor"] == {"kind": "step", "key": "loss", "id": None, "step": 2}
    assert c["author"]["name"] == "zed" and not c["team"] and c["mine"] and c["state"] == "visible"
    assert "<strong>bump</strong>" in c["html"]
    listed = anonymous.get(f"{API}/runs/{world['run']}/comments").json()
    assert [x["id"] for x in listed["comments"]] == [c["id"]]
    assert listed["comments"][0]["body"] is None and not listed["signed_in"] and not listed["moderator"]
    # A reply to a reply joins the thread (one level); a member's reply is the team's answer.
    ada = browser(client, "ada")
    reply = post(ada, world["run"], "A data-mix change.", parent=c["id"]).json()
    again = post(zed, world["run"], "Thanks", parent=reply["id"]).json()
    assert reply["team"] and reply["parent"] == c["id"] and again["parent"] == c["id"]
    assert again["anchor"]["step"] == 2


@pytest.mark.parametrize("anchor, field", [
    (step(at=99), "anchor.step"), (step(key="nope"), "anchor.step"), ({"kind": "checkpoint", "id": 5}, "anchor.id"),
    ({"kind": "alert", "id": 1}, "anchor.id"), ({"kind": "sample", "id": 1}, "anchor.id"),
    ({"kind": "eval", "id": 1}, "anchor.id"), ({"kind": "step", "key": "loss"}, "anchor.key"),
    ({"kind": "planet", "id": 1}, "anchor.kind"),
    (step(at=2**90), "anchor.step"), ({"kind": "checkpoint", "id": 2**90}, "anchor.id"),  # past a 64-bit column
])
def test_an_anchor_that_does_not_exist_is_refused_and_nothing_is_written(
        client: Any, world: dict[str, Any], anchor: dict[str, Any], field: str) -> None:
    zed = browser(client, "zed")
    res = post(zed, world["run"], "hi", anchor=anchor)
    assert res.status_code in (404, 422), res.text
    assert res.json()["error"]["field"].endswith(field.split(".")[-1])
    assert client.get(f"{API}/runs/{world['run']}/comments").json()["comments"] == []


def test_a_reply_to_a_comment_id_past_64_bits_is_a_422_naming_parent(client: Any, world: dict[str, Any]) -> None:
    res = post(browser(client, "zed"), world["run"], "K", parent=3047588844868220429847756800)  # found by schemathesis
    assert res.status_code == 422 and res.json()["error"]["field"] == "parent", res.text


def test_anchors_on_samples_evaluations_and_checkpoints(client: Any, seed: Any, world: dict[str, Any]) -> None:
    sim = seed.run("pp", name="outputs").start()
    sim.send([sim.sample(4, "p1", "out"), sim.evaluation(4, "mmlu", {"acc": 0.5}),
              sim.event("checkpoint", step=4, path="/ck/4", size=10)])
    token = world["tokens"]["team"]
    samples = client.get(f"{API}/runs/{sim.run}/samples", headers=bearer(token)).json()
    evals = client.get(f"{API}/runs/{sim.run}/evals", headers=bearer(token)).json()
    ckpts = client.get(f"{API}/runs/{sim.run}/checkpoints", headers=bearer(token)).json()
    zed = browser(client, "zed")
    sample_id = (samples.get("samples") or samples.get("items"))[0]["id"]
    eval_id = (evals.get("evals") or evals.get("items") or evals.get("results"))[0]["id"]
    ckpt_id = ckpts["checkpoints"][0]["id"]
    for kind, rid in (("sample", sample_id), ("eval", eval_id), ("checkpoint", ckpt_id)):
        res = post(zed, sim.run, f"on the {kind}", anchor={"kind": kind, "id": rid})
        assert res.status_code == 201, res.text
        assert res.json()["anchor"]["step"] == 4


def test_the_team_moderates_and_others_cannot(client: Any, world: dict[str, Any]) -> None:
    run = world["run"]
    zed, eve, vic, ada = (browser(client, n) for n in ("zed", "eve", "vic", "ada"))
    c = post(zed, run, "first", anchor=step()).json()
    url = f"{API}/runs/{run}/comments/{c['id']}/moderation"
    for who, headers in ((eve, SAME), (vic, SAME)):
        res = who.post(url, json={"hidden": True}, headers=headers)
        assert res.status_code == 403 and res.json()["error"]["field"] == "runcast_session"
    res = client.post(url, json={"hidden": True}, headers=bearer(world["tokens"]["read"]))
    assert res.status_code == 403 and res.json()["error"]["field"] == "Authorization"
    res = client.post(url, json={"hidden": True}, headers=bearer(world["tokens"]["qq"]))
    assert res.status_code == 403
    assert client.get(f"{API}/runs/{run}/comments").json()["comments"][0]["state"] == "visible"
    # The team pins and locks (a member's session), then hides (a team token).
    pinned = ada.post(url, json={"pinned": True, "locked": True}, headers=SAME)
    assert pinned.status_code == 200 and pinned.json()["pinned"] and pinned.json()["locked"]
    refused = post(eve, run, "me too", parent=c["id"])
    assert refused.status_code == 409 and refused.json()["error"]["field"] == "parent"
    assert post(ada, run, "the team may still answer", parent=c["id"]).status_code == 201
    assert client.post(url, json={"hidden": True}, headers=bearer(world["tokens"]["team"])).status_code == 200
    assert client.get(f"{API}/runs/{run}/comments").json()["comments"] == []  # its thread is gone for the public
    seen = client.get(f"{API}/runs/{run}/comments", headers=bearer(world["tokens"]["team"])).json()
    assert seen["moderator"] and seen["comments"][0]["state"] == "hidden"


def test_a_team_token_answers_as_the_team_and_other_tokens_do_not_write(client: Any, world: dict[str, Any]) -> None:
    run = world["run"]
    res = client.post(f"{API}/runs/{run}/comments", json={"body": "From the team", "anchor": step()},
                      headers=bearer(world["tokens"]["team"]))
    assert res.status_code == 201 and res.json()["team"] and res.json()["author"] is None
    for token in (world["tokens"]["read"], world["tokens"]["qq"]):
        res = client.post(f"{API}/runs/{run}/comments", json={"body": "x", "anchor": step()}, headers=bearer(token))
        assert res.status_code == 403 and res.json()["error"]["field"] == "Authorization"
    res = client.post(f"{API}/runs/{run}/comments", json={"body": "x", "anchor": step()})
    assert res.status_code == 401


def test_reports_and_hold_for_approval(client: Any, world: dict[str, Any]) -> None:
    run = world["run"]
    zed, eve, ada = browser(client, "zed"), browser(client, "eve"), browser(client, "ada")
    c = post(zed, run, "spam?", anchor=step()).json()
    assert eve.post(f"{API}/runs/{run}/comments/{c['id']}/reports", json={"reason": "spam"},
                    headers=SAME).status_code == 202
    assert client.post(f"{API}/runs/{run}/comments/{c['id']}/reports", json={}).status_code == 401
    assert eve.get(f"{API}/runs/{run}/comment-reports").status_code == 403
    reports = ada.get(f"{API}/runs/{run}/comment-reports").json()["reports"]
    assert [(r["comment"], r["reporter"], r["reason"]) for r in reports] == [(c["id"], "eve", "spam")]
    assert ada.get(f"{API}/runs/{run}/comments").json()["comments"][0]["reports"] == 1
    # Hold: a new comment is seen by its author and the team only, until approved.
    assert eve.put(f"{API}/runs/{run}/comment-settings", json={"hold": True}, headers=SAME).status_code == 403
    assert ada.put(f"{API}/runs/{run}/comment-settings", json={"hold": True}, headers=SAME).json()["hold"]
    held = post(eve, run, "held back", anchor=step(at=3)).json()
    assert held["state"] == "held"
    assert [x["id"] for x in zed.get(f"{API}/runs/{run}/comments").json()["comments"]] == [c["id"]]
    assert held["id"] in [x["id"] for x in eve.get(f"{API}/runs/{run}/comments").json()["comments"]]
    assert ada.post(f"{API}/runs/{run}/comments/{held['id']}/moderation", json={"approved": True},
                    headers=SAME).json()["state"] == "visible"
    assert held["id"] in [x["id"] for x in zed.get(f"{API}/runs/{run}/comments").json()["comments"]]


def test_edit_and_delete_keep_versions_for_the_team(client: Any, world: dict[str, Any]) -> None:
    run = world["run"]
    zed, eve, ada = browser(client, "zed"), browser(client, "eve"), browser(client, "ada")
    c = post(zed, run, "typo", anchor=step()).json()
    url = f"{API}/runs/{run}/comments/{c['id']}"
    assert eve.patch(url, json={"body": "hijack"}, headers=SAME).status_code == 403
    edited = zed.patch(url, json={"body": "fixed"}, headers=SAME).json()
    assert edited["body"] == "fixed" and edited["edited_at"] is not None
    assert zed.delete(url, headers=SAME).status_code == 204
    assert client.get(f"{API}/runs/{run}/comments").json()["comments"] == []
    versions = ada.get(f"{url}/versions").json()["versions"]
    assert [v["body"] for v in versions] == ["typo", "fixed"]
    assert zed.get(f"{url}/versions").status_code == 403


def test_private_runs_are_the_projects(client: Any, world: dict[str, Any]) -> None:
    zed, vic = browser(client, "zed"), browser(client, "vic")
    for run in (world["private"], world["theirs"]):
        assert post(zed, run, "x", anchor={"kind": "step", "key": "loss", "step": 1}).status_code == 404
        assert zed.get(f"{API}/runs/{run}/comments").status_code == 404
    assert post(vic, world["theirs"], "x", anchor={"kind": "step", "key": "loss", "step": 1}).status_code == 404
    mine = post(vic, world["private"], "a viewer comments", anchor={"kind": "step", "key": "loss", "step": 1})
    assert mine.status_code == 201 and not mine.json()["team"]
    assert client.get(f"{API}/runs/{world['private']}/comments").status_code == 404
    assert client.get(f"{API}/runs/{world['private']}/comments",
                      headers=bearer(world["tokens"]["qq"])).status_code == 404


def test_a_cross_site_write_is_refused(client: Any, world: dict[str, Any]) -> None:
    zed = browser(client, "zed")
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}):
        res = zed.post(f"{API}/runs/{world['run']}/comments", json={"body": "x", "anchor": step()}, headers=headers)
        assert res.status_code == 403 and res.json()["error"]["field"] == "Origin"
    assert client.get(f"{API}/runs/{world['run']}/comments").json()["comments"] == []


def test_a_flood_is_refused_with_retry_after(client: Any, world: dict[str, Any]) -> None:
    zed = browser(client, "zed")
    limit = client.app.state.context.settings.comment_rate_limit
    for i in range(limit):
        assert post(zed, world["run"], f"n{i}", anchor=step()).status_code == 201
    res = post(zed, world["run"], "one too many", anchor=step())
    assert res.status_code == 429 and int(res.headers["Retry-After"]) >= 1
    assert res.json()["error"]["message"]
    assert len(client.get(f"{API}/runs/{world['run']}/comments").json()["comments"]) == limit
    # Another person from the same address is limited by the address's budget.
    address = client.app.state.context.settings.comment_address_rate_limit
    people_left = address - limit - 1  # the refused attempt counted too
    eve = browser(client, "eve")
    codes = [post(eve, world["run"], f"e{i}", anchor=step()).status_code for i in range(min(people_left + 1, 10))]
    assert set(codes) <= {201, 429}


HOSTILE = ("<script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) "
           "![pixel](https://tracker.example/p.png) <a href='https://x.example' onclick='alert(4)'>a</a> "
           "[ok](https://ok.example)")


def _tags(html: str) -> list[tuple[str, list[tuple[str, str]]]]:
    found: list[tuple[str, list[tuple[str, str]]]] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, [(k, v or "") for k, v in attrs]))

    Tags().feed(html)
    return found


def test_hostile_markdown_is_neutralised_in_the_stored_html(client: Any, world: dict[str, Any], db: Any) -> None:
    zed = browser(client, "zed")
    html = post(zed, world["run"], HOSTILE, anchor=step()).json()["html"]
    tags = _tags(html)  # as a browser parses it: escaped text stays text
    assert {t for t, _ in tags} <= {"p", "a"}
    assert all(name in ("href", "target", "rel") for _, attrs in tags for name, _ in attrs)
    assert all(value.startswith("https://") for _, attrs in tags for name, value in attrs if name == "href")
    assert '<a href="https://tracker.example/p.png" target="_blank" rel="nofollow ugc noopener">pixel</a>' in html
    assert '<a href="https://ok.example" target="_blank" rel="nofollow ugc noopener">ok</a>' in html
    with db.engine.connect() as conn:
        stored = conn.execute(text("SELECT body, html FROM comments")).one()
    assert stored.body == HOSTILE and stored.html == html
