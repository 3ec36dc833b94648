"""The SDK as a training script drives it against a real server (HTTP): the plain loop polls
``run.commands()`` at step boundaries, a ``set`` changes a declared tunable when acknowledged, a
script that did not opt in refuses with a message, and ``on_command`` with only a checkpoint
function stops at the current step after a checkpoint and exits 0."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
import runcast
from artifacts.live import LiveServer
from runcast.commands import NOT_TAKEN
from runcast_server.core.auth import create_token

API = "/api/v1"


@pytest.fixture
def tokens(client: Any, db: Any) -> dict[str, str]:
    with db.scope() as session:
        return {"ingest": create_token(session, "pp", label="trainer", scopes=["ingest"]),
                "team": create_token(session, "pp", label="ops", scopes=["team"])}


def _send(server: Any, token: str, run: str, **body: Any) -> dict[str, Any]:
    res = httpx.post(f"{server.url}{API}/runs/{run}/commands", json={"reason": "because", **body},
                     headers={"Authorization": f"Bearer {token}"}, timeout=30)  # a loaded machine's bound
    assert res.status_code == 201, res.text
    return res.json()


def _listed(server: Any, run: str) -> dict[str, dict[str, Any]]:
    return {c["command"]: c for c in httpx.get(f"{server.url}{API}/runs/{run}/commands", timeout=30).json()["commands"]}


def _train_until(run: Any, done: Any, start: int = 1, limit: float = 20.0) -> int:
    step, deadline = start, time.monotonic() + limit
    while not done() and time.monotonic() < deadline:
        run.log({"loss": 1.0 / step}, step=step)
        step += 1
        time.sleep(0.02)
    assert done(), "the command never arrived"
    return step


def test_the_plain_loop_takes_a_set_and_the_tunable_changes_at_the_acknowledged_step(
        client: Any, tokens: dict[str, str]) -> None:
    with LiveServer(client.app) as server:
        run = runcast.init(project="pp", server=server.url, token=tokens["ingest"], mode="online")
        scale = run.tunable("lr_scale", 1.0, min=0.1, max=4.0)
        run.flush()
        sent = _send(server, tokens["team"], run.id, kind="set", name="lr_scale", value=0.25)
        taken: list[Any] = []
        step = 1
        deadline = time.monotonic() + 20
        while not taken and time.monotonic() < deadline:
            run.log({"lr": 0.1 * scale.value}, step=step)
            for cmd in run.commands():
                assert (cmd.kind, cmd.name, cmd.value, cmd.sender) == ("set", "lr_scale", 0.25, "ops")
                cmd.ack(step=step, message="lr scaled")
                taken.append(step)
            step += 1
            time.sleep(0.02)
        assert taken and scale.value == 0.25
        run.log({"lr": 0.1 * scale.value}, step=step)
        run.finish()
        entry = _listed(server, run.id)[sent["command"]]
        assert (entry["state"], entry["step"], entry["outcome"]) == ("acknowledged", taken[0], "applied")
        series = httpx.get(f"{server.url}{API}/runs/{run.id}/metrics", timeout=30,
                           params={"key": "lr", "max_points": 20000}).json()["series"]
        assert set(series[0]["count"]) == {1}  # one point a bucket: the raw values
        points = dict(zip(series[0]["step"], series[0]["last"], strict=True))
        # lr was logged at the acknowledged step before the ack (0.1), and after it at the next (0.025).
        assert points[taken[0]] == pytest.approx(0.1) and points[step] == pytest.approx(0.025)
        assert all(points[s] == pytest.approx(0.1) for s in range(1, taken[0] + 1))


def test_a_script_that_did_not_opt_in_refuses_with_a_message(client: Any, tokens: dict[str, str]) -> None:
    with LiveServer(client.app) as server:
        run = runcast.init(project="pp", server=server.url, token=tokens["ingest"], mode="online")
        run.log({"loss": 1.0}, step=1)
        run.flush()
        sent = _send(server, tokens["team"], run.id, kind="stop")
        _train_until(run, lambda: _listed(server, run.id)[sent["command"]]["state"] == "acknowledged", start=2)
        run.finish()
        entry = _listed(server, run.id)[sent["command"]]
        assert (entry["outcome"], entry["message"]) == ("refused", NOT_TAKEN)


def test_on_command_stops_after_a_checkpoint_and_exits_0(client: Any, tokens: dict[str, str]) -> None:
    saved: list[int] = []
    with LiveServer(client.app) as server:
        run = runcast.init(project="pp", server=server.url, token=tokens["ingest"], mode="online")
        run.on_command(checkpoint=saved.append)
        run.log({"loss": 1.0}, step=1)
        run.flush()
        sent = _send(server, tokens["team"], run.id, kind="stop")
        with pytest.raises(SystemExit) as exited:
            _train_until(run, lambda: False, start=2)
        assert exited.value.code == 0 and run.finished
        entry = _listed(server, run.id)[sent["command"]]
        assert entry["state"] == "acknowledged" and entry["step"] == saved[0]
        assert httpx.get(f"{server.url}{API}/runs/{run.id}", timeout=30).json()["status"] == "finished"
