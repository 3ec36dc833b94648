"""Commands and the clock, on an embedded server whose periodic check runs every 0.3 s and whose
commands expire after 2 s (RUNCAST_COMMAND_EXPIRE_S, RUNCAST_ALERT_CHECK_INTERVAL_S).

A command sent to a run whose trainer is gone expires at its time on its own: the API says
"expired" with its message, the timeline has the decision, and the run's next version carries it
(what the stream and the cached follow mode hand to open pages). A paused trainer keeps
heartbeating: a pause longer than the run's stall threshold opens no stall alert and the run stays
running; the same trainer killed does get its stall alert (the check is alive)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from artifacts.live import LiveServer
from fastapi.testclient import TestClient
from runcast_server.app import create_app
from runcast_server.core.auth import create_token
from runcast_server.core.settings import Settings
from services import ROOT

from commands.helpers import API, Trainer
from commands.paused_trainer import STALL_AFTER_S

EXPIRE_S = 2.0


@pytest.fixture
def expire_s() -> float:
    """The server's command expiry; a test that needs no expiry sets a long one (a loaded machine
    can take more than 2 s to deliver a command to a trainer process)."""
    return EXPIRE_S


@pytest.fixture
def client(embedded_env: Path, monkeypatch: pytest.MonkeyPatch, expire_s: float) -> Iterator[TestClient]:
    monkeypatch.setenv("RUNCAST_COMMAND_EXPIRE_S", str(expire_s))
    monkeypatch.setenv("RUNCAST_ALERT_CHECK_INTERVAL_S", "0.3")
    with TestClient(create_app(Settings())) as test_client:
        yield test_client


@pytest.fixture
def tokens(db: Any) -> dict[str, str]:
    with db.scope() as session:
        return {"ingest": create_token(session, "pp", label="trainer", scopes=["ingest"]),
                "team": create_token(session, "pp", label="ops", scopes=["team"])}


def _until(check: Any, what: str, limit: float = 60.0) -> Any:
    deadline = time.monotonic() + limit  # a failure's bound, not a timing
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return found


def test_a_command_to_a_gone_trainer_expires_at_its_time_on_its_own(client: Any, tokens: dict[str, str]) -> None:
    trainer = Trainer(client, tokens["ingest"], "goneaway01")
    assert trainer.start().status_code == 202 and trainer.step(1).status_code == 202  # then it is gone
    version = client.get(f"{API}/runs/goneaway01/broadcast/edge").json()["version"]
    sent = client.post(f"{API}/runs/goneaway01/commands", json={"kind": "pause", "reason": "look at the data"},
                       headers={"Authorization": f"Bearer {tokens['team']}"})
    assert sent.status_code == 201, sent.text
    command = sent.json()

    def listed() -> dict[str, Any]:
        return {c["command"]: c for c in client.get(f"{API}/runs/goneaway01/commands").json()["commands"]}[command["command"]]

    assert listed()["state"] == "pending"

    def edge_states() -> list[str]:  # what a page following through the cache gets; no read of the list
        edge = client.get(f"{API}/runs/goneaway01/broadcast/edge").json()
        return [e["payload"]["state"] for m in edge["messages"] for e in m["events"] if e["type"] == "command"]

    _until(lambda: edge_states() == ["pending", "expired"], "the command never expired on its own")
    assert time.time() >= command["expires_at"]
    entry = listed()
    assert entry["state"] == "expired"
    assert entry["message"] == "expired before the trainer acknowledged it"
    assert (entry["step"], entry["outcome"], entry["acked_at"]) == (None, None, None)
    # On the run's public record: the timeline has both events, each a version of the run of its own.
    events = [e for e in client.get(f"{API}/runs/goneaway01/events").json()["events"] if e["type"] == "command"]
    assert [e["payload"]["state"] for e in events] == ["pending", "expired"]
    assert client.get(f"{API}/runs/goneaway01").json()["status"] == "running"
    # Each event is a version of its own, whose message the stream sends and the edge carries.
    assert client.get(f"{API}/runs/goneaway01/broadcast/edge").json()["version"] == version + 2
    # The trainer back later gets nothing, and its acknowledgement is refused.
    assert "commands" not in trainer.step(2).json()
    late = trainer.ack(command["command"], 2)
    assert late.status_code == 409 and late.json()["error"]["field"] == "command"


def _stall_alerts(url: str, run: str, token: str) -> list[dict[str, Any]]:
    res = httpx.get(f"{url}{API}/runs/{run}/alerts", timeout=30, headers={"Authorization": f"Bearer {token}"})
    assert res.status_code == 200, res.text
    return [a for a in res.json()["alerts"] if a["kind"] == "stall"]


def _send(url: str, token: str, run: str, kind: str) -> str:
    res = httpx.post(f"{url}{API}/runs/{run}/commands", json={"kind": kind, "reason": "hold on"},
                     headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert res.status_code == 201, res.text
    return str(res.json()["command"])


@pytest.mark.parametrize("expire_s", [300.0])
def test_a_pause_longer_than_the_stall_threshold_raises_no_alert_and_a_killed_trainer_does(
        client: Any, tokens: dict[str, str], tmp_path: Path) -> None:
    with LiveServer(client.app) as server:
        out = tmp_path / "run-id"
        # The child imports this checkout's SDK and the tests' module: pytest's pythonpath is its own.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "trainer"), str(ROOT / "tests")]),
               "RUNCAST_SPOOL_DIR": str(tmp_path / "spool"), "RUNCAST_SYSTEM_INTERVAL": "off"}
        child = subprocess.Popen([sys.executable, "-m", "commands.paused_trainer", server.url, tokens["ingest"], str(out)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            run = _until(lambda: out.exists() and out.read_text(), "the trainer never started")

            def command(uid: str) -> dict[str, Any]:
                commands = httpx.get(f"{server.url}{API}/runs/{run}/commands", timeout=30).json()["commands"]
                return next(c for c in commands if c["command"] == uid)

            def last_step() -> int:
                return int(httpx.get(f"{server.url}{API}/runs/{run}", timeout=30).json()["last_step"] or 0)

            pause = _send(server.url, tokens["team"], run, "pause")
            paused = _until(lambda: (c := command(pause))["state"] == "acknowledged" and c, "never paused")
            assert paused["outcome"] == "applied", paused
            held_at = last_step()
            time.sleep(2 * STALL_AFTER_S)  # held twice the threshold: the heartbeats go on
            assert last_step() == held_at == paused["step"]
            assert _stall_alerts(server.url, run, tokens["team"]) == []
            assert httpx.get(f"{server.url}{API}/runs/{run}", timeout=30).json()["status"] == "running"
            resume = _send(server.url, tokens["team"], run, "resume")
            _until(lambda: command(resume)["state"] == "acknowledged", "never resumed")
            _until(lambda: last_step() > held_at + 5, "no step after the resume")
            assert _stall_alerts(server.url, run, tokens["team"]) == []
        finally:
            child.kill()  # no more steps, no more heartbeats
            child.wait(timeout=30)
        stall = _until(lambda: _stall_alerts(server.url, run, tokens["team"]), "the killed trainer never stalled")
        assert [a["state"] for a in stall] == ["open"]
