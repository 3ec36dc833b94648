"""The SDK as a training script drives it against a real server (HTTP): the plain loop polls
``run.commands()`` at step boundaries, a ``set`` changes a declared tunable when acknowledged, a
script that did not opt in refuses with a message, ``on_command`` with only a checkpoint
function stops at the current step after a checkpoint and exits 0, and a command carried by the
answer to a spool replayed after an outage is held by the SDK (the server counts it delivered)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
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


class Door:
    """An HTTP hop in front of the server that answers 503 while shut (the service unavailable)."""

    def __init__(self, target: str) -> None:
        self.shut = False
        client = httpx.Client(base_url=target, timeout=30)
        door = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if door.shut:
                    status, kind, content = 503, "application/json", b'{"error": {"message": "down"}}'
                else:
                    keep = {k: v for k, v in self.headers.items()
                            if k.lower() in ("authorization", "content-type", "content-encoding")}
                    r = client.request(self.command, self.path, content=body, headers=keep)
                    status, kind, content = r.status_code, r.headers.get("Content-Type", ""), r.content
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_PUT = do_HEAD = _forward  # http.server's names

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def test_a_command_carried_by_the_answer_to_a_replayed_spool_is_held(
        client: Any, tokens: dict[str, str], tmp_path: Path) -> None:
    with LiveServer(client.app) as server:
        door = Door(server.url)
        try:  # no heartbeat to carry the command again: only the replay's answer carries it
            run = runcast.init(project="pp", server=door.url, token=tokens["ingest"], mode="online",
                               heartbeat_interval=3600, retry_initial=0.1, spool_dir=str(tmp_path / "spool"))
            scale = run.tunable("lr_scale", 1.0, min=0.1, max=4.0)
            assert run.flush()
            door.shut = True
            run.log({"loss": 1.0}, step=1)
            assert not run.flush(timeout=5)  # the outage: spooled
            sent = _send(server, tokens["team"], run.id, kind="set", name="lr_scale", value=0.5)
            door.shut = False
            deadline = time.monotonic() + 60  # a failure's bound
            while not run.flush(timeout=5):
                assert time.monotonic() < deadline, "the spool was never replayed"
            assert _listed(server, run.id)[sent["command"]]["state"] == "delivered"
            held = run.commands()
            assert [c.id for c in held] == [sent["command"]]
            held[0].ack(step=1)
            assert scale.value == 0.5
            run.finish()
            entry = _listed(server, run.id)[sent["command"]]
            assert (entry["state"], entry["step"], entry["outcome"]) == ("acknowledged", 1, "applied")
        finally:
            door.close()
