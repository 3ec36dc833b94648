"""Commands from the team's seat and the trainer's: a ``team`` token or a member sends, the ingest
answer delivers, a ``command_ack`` acknowledges, and each step is on the run's public record.
Abuse: a ``read`` or ``ingest`` token, a viewer, another project's token, a forged or replayed
ack, an expired command, a finished run; each refused with a clear error, nothing else changed."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from runcast_server.alerts.stall import sweep
from runcast_server.core.auth import create_token, get_or_create_project
from runcast_server.people import service as people
from sqlalchemy import text

from commands.helpers import API, Trainer

SAME = {"Sec-Fetch-Site": "same-origin"}
PASSWORD = "correct horse battery"


@pytest.fixture
def world(client: Any, db: Any) -> dict[str, Any]:
    with db.scope() as session:
        tokens = {s: create_token(session, "pp", label=f"{s} bot", scopes=[s]) for s in ("read", "ingest", "team")}
        tokens["other"] = create_token(session, "qq", label="them")
        for name in ("ada", "vic"):
            people.create_user(session, name, display_name=name.title() + " L.", password=PASSWORD)
        project = get_or_create_project(session, "pp")
        people.grant(session, project, people.find_user(session, "ada"), "member")  # type: ignore[arg-type]
        people.grant(session, project, people.find_user(session, "vic"), "viewer")  # type: ignore[arg-type]
    trainer = Trainer(client, tokens["ingest"], "cmdrun0001")
    assert trainer.start().status_code == 202
    assert trainer.step(1).json() == {"accepted": 1}  # no "commands" key when none waits
    return {"tokens": tokens, "trainer": trainer}


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _send(client: Any, token: str, run: str = "cmdrun0001", **body: Any) -> Any:
    return client.post(f"{API}/runs/{run}/commands", json={"reason": "loss spiked", **body}, headers=_h(token))


def _browser(client: Any, name: str) -> TestClient:
    browser = TestClient(client.app)
    res = browser.post(f"{API}/session/password", json={"name": name, "password": PASSWORD}, headers=SAME)
    assert res.status_code == 200, res.text
    return browser


def _counts(db: Any) -> tuple[Any, ...]:
    with db.engine.connect() as conn:
        return (conn.execute(text("SELECT id, state, step, outcome FROM commands ORDER BY id")).all(),
                conn.execute(text("SELECT COUNT(*) FROM events WHERE type = 'command'")).scalar(),
                conn.execute(text("SELECT commands_pending FROM runs")).all())


def test_a_command_is_delivered_once_acknowledged_and_on_the_public_record(client: Any, world: dict[str, Any]) -> None:
    trainer = world["trainer"]
    sent = _send(client, world["tokens"]["team"], kind="stop")
    assert sent.status_code == 201, sent.text
    command = sent.json()
    assert command["state"] == "pending" and command["sender"] == "team bot" and command["reason"] == "loss spiked"
    answer = trainer.step(2).json().get("commands", [])
    assert [c["id"] for c in answer] == [command["command"]] and answer[0]["kind"] == "stop"
    # Until acknowledged, it comes again (the trainer acts on an id once).
    assert [c["id"] for c in trainer.step(3).json().get("commands", [])] == [command["command"]]
    listed = client.get(f"{API}/runs/cmdrun0001/commands").json()["commands"]
    assert listed[0]["state"] == "delivered"
    assert trainer.ack(command["command"], 3, message="checkpoint at step 3, exiting").status_code == 202
    assert trainer.step(4).json().get("commands", []) == []
    public = client.get(f"{API}/runs/cmdrun0001/commands").json()["commands"]
    assert public[0] | {"acked_at": None} == public[0] | {
        "state": "acknowledged", "step": 3, "outcome": "applied", "message": "checkpoint at step 3, exiting",
        "acked_at": None}
    timeline = client.get(f"{API}/runs/cmdrun0001/events", params={"type": "command"}).json()["events"]
    assert [(e["payload"]["state"], e["payload"]["sender"]) for e in timeline] == [
        ("pending", "team bot"), ("acknowledged", "team bot")]


def test_a_member_sends_with_her_name_on_the_record_and_set_is_checked_against_the_tunables(
        client: Any, world: dict[str, Any]) -> None:
    ada = _browser(client, "ada")
    res = ada.post(f"{API}/runs/cmdrun0001/commands", json={"kind": "set", "name": "lr_scale", "value": 0.5,
                                                            "reason": "halve the lr"}, headers=SAME)
    assert res.status_code == 201, res.text
    assert res.json()["sender"] == "Ada L." and res.json()["value"] == 0.5
    for body, field in (({"name": "lr_scale", "value": 9.0}, "value"), ({"name": "momentum", "value": 0.5}, "name"),
                        ({"value": 0.5}, "name"), ({"name": "lr_scale", "value": "x"}, "value")):
        bad = _send(client, world["tokens"]["team"], kind="set", **body)
        assert bad.status_code == 422 and bad.json()["error"]["field"] == field, bad.text
    stop_with_value = _send(client, world["tokens"]["team"], kind="stop", value=1.0)
    assert stop_with_value.status_code == 422 and stop_with_value.json()["error"]["field"] == "value"
    assert len(client.get(f"{API}/runs/cmdrun0001/commands").json()["commands"]) == 1


def test_who_may_not_send_is_refused_and_nothing_is_written(client: Any, db: Any, world: dict[str, Any]) -> None:
    before = _counts(db)
    for scope in ("read", "ingest"):
        res = _send(client, world["tokens"][scope], kind="stop")
        assert res.status_code == 403 and res.json()["error"]["field"] == "Authorization", res.text
        assert "'team' scope" in res.json()["error"]["message"]
    other = _send(client, world["tokens"]["other"], kind="stop")
    assert other.status_code == 404 and other.json()["error"]["field"] == "run"
    vic = _browser(client, "vic").post(f"{API}/runs/cmdrun0001/commands", json={"kind": "stop", "reason": "x"},
                                       headers=SAME)
    assert vic.status_code == 403 and vic.json()["error"]["field"] == "runcast_session"
    cross = _browser(client, "ada").post(f"{API}/runs/cmdrun0001/commands", json={"kind": "stop", "reason": "x"},
                                         headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403 and cross.json()["error"]["field"] == "Origin"
    anonymous = client.post(f"{API}/runs/cmdrun0001/commands", json={"kind": "stop", "reason": "x"})
    assert anonymous.status_code == 401
    blank = _send(client, world["tokens"]["team"], kind="stop", reason="  ")
    assert blank.status_code == 422 and "reason" in blank.text
    unknown = _send(client, world["tokens"]["team"], kind="explode")
    assert unknown.status_code == 422 and "kind" in unknown.text
    assert _counts(db) == before


def test_forged_replayed_and_expired_acks_refuse_the_batch(client: Any, db: Any, world: dict[str, Any]) -> None:
    trainer, team = world["trainer"], world["tokens"]["team"]
    command = _send(client, team, kind="checkpoint").json()["command"]
    trainer.step(2)
    forged = trainer.ack("cmd_forgedforgedforged", 2)
    assert forged.status_code == 404 and forged.json()["error"] == {
        "message": "unknown command 'cmd_forgedforgedforged' for run 'cmdrun0001'", "field": "command", "index": 0}
    # Another run's trainer (same project) cannot acknowledge this run's command.
    stranger = Trainer(client, world["tokens"]["ingest"], "cmdrun0002")
    stranger.start()
    assert stranger.ack(command, 1).status_code == 404
    ok = trainer.ack(command, 2)
    assert ok.status_code == 202
    acked = trainer.last
    before = _counts(db)
    replay = trainer.ack(command, 5, outcome="refused")
    assert replay.status_code == 409 and "already acknowledged" in replay.json()["error"]["message"]
    assert replay.json()["error"]["field"] == "command"
    assert _counts(db) == before
    # The very same event sent again (a lost 202) is no replay: accepted, nothing changes.
    trainer.last = acked
    assert trainer.resend().status_code == 202
    assert _counts(db) == before
    # Expired: a command nobody acknowledged in time.
    late = _send(client, team, kind="pause").json()["command"]
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE commands SET expires_at = 1 WHERE uid = :u"), {"u": late})
    expired = trainer.ack(late, 6)
    assert expired.status_code == 409 and "expired" in expired.json()["error"]["message"]
    assert trainer.step(7).json().get("commands", []) == []
    sweep(client.app.state.context)  # the periodic check marks it so (test_command_timing.py: on its own, on time)
    listed = {c["command"]: c for c in client.get(f"{API}/runs/cmdrun0001/commands").json()["commands"]}
    assert listed[late]["state"] == "expired" and listed[command]["step"] == 2


def test_a_finished_run_takes_no_command(client: Any, db: Any, world: dict[str, Any]) -> None:
    trainer = world["trainer"]
    assert trainer.post({"type": "finished", "step": 2, "status": "finished"}).status_code == 202
    before = _counts(db)
    res = _send(client, world["tokens"]["team"], kind="stop")
    assert res.status_code == 409 and res.json()["error"]["field"] == "run", res.text
    assert _counts(db) == before


def test_the_policy_withholds_commands_from_the_public_not_from_the_team(client: Any, world: dict[str, Any]) -> None:
    team = world["tokens"]["team"]
    assert client.put(f"{API}/runs/cmdrun0001/policy", json={"commands": "hidden"}, headers=_h(team)).status_code == 200
    assert _send(client, team, kind="checkpoint").status_code == 201
    assert client.get(f"{API}/runs/cmdrun0001/commands").status_code == 404
    assert client.get(f"{API}/runs/cmdrun0001/events", params={"type": "command"}).json()["events"] == []
    assert len(client.get(f"{API}/runs/cmdrun0001/commands", headers=_h(team)).json()["commands"]) == 1
    assert len(client.get(f"{API}/runs/cmdrun0001/events", params={"type": "command"},
                          headers=_h(team)).json()["events"]) == 1
