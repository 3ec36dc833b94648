"""``runcast runs stop|checkpoint|pause|resume|set|commands`` as the team runs them against ``runcast
serve`` (HTTP only): each verb sends its command, the trainer's answer shows in ``runs commands``;
a bad flag, a ``read`` token, another project's token, an out-of-bounds value and a finished run
each exit non-zero naming the flag or the server's field, and write nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import services
from api.test_runs_cli import FAILED, NOT_FOUND, OK, REFUSED, USAGE, runcast
from runcast_server.core.auth import create_token
from sqlalchemy import text

from commands.helpers import API, Trainer

RUN = "clirun0001"


@pytest.fixture
def server(client: Any, embedded_env: Path, tmp_path: Path) -> Iterator[str]:
    proc, url = services.start_api({"RUNCAST_DATA_DIR": str(embedded_env)}, tmp_path / "api.log")
    try:
        yield url
    finally:
        proc.stop()


@pytest.fixture
def tokens(client: Any, db: Any) -> dict[str, str]:
    with db.scope() as session:
        made = {s: create_token(session, "pp", label=f"{s} bot", scopes=[s]) for s in ("read", "ingest", "team")}
        made["other"] = create_token(session, "qq", label="them")
    return made


def _commands(db: Any) -> list[Any]:
    with db.engine.connect() as conn:
        return list(conn.execute(text("SELECT uid, state FROM commands ORDER BY id")).all())


def test_each_verb_sends_and_the_list_shows_the_trainers_answers(client: Any, server: str,
                                                                   tokens: dict[str, str]) -> None:
    trainer = Trainer(client, tokens["ingest"], RUN)
    assert trainer.start().status_code == 202 and trainer.step(1).status_code == 202
    env = {"RUNCAST_SERVER": server, "RUNCAST_TOKEN": tokens["team"]}
    sent = {}
    for args in (["stop", RUN, "--reason", "loss diverged"], ["checkpoint", RUN], ["pause", RUN, "--reason", "x"],
                 ["resume", RUN], ["set", RUN, "lr_scale", "0.5", "--reason", "halve the lr"]):
        res = runcast("runs", *args, "--json", **env)
        assert res.returncode == OK, res.stderr
        sent[args[0]] = json.loads(res.stdout)
    assert sent["stop"]["reason"] == "loss diverged" and sent["stop"]["sender"] == "team bot"
    assert sent["checkpoint"]["reason"] == "sent from the command line"
    assert (sent["set"]["name"], sent["set"]["value"]) == ("lr_scale", 0.5)
    plain = runcast("runs", "checkpoint", RUN, "--reason", "before the mix change", **env)
    assert plain.returncode == OK and plain.stdout.startswith("command cmd_") and "(checkpoint)" in plain.stdout

    delivered = [c["id"] for c in trainer.step(2).json()["commands"]]
    assert len(delivered) == 6
    assert trainer.ack(sent["set"]["command"], 2, message="lr x0.5 from step 2").status_code == 202
    assert trainer.ack(sent["pause"]["command"], 2, outcome="refused", message="no pause here").status_code == 202
    listed = runcast("runs", "commands", RUN, **env)
    assert listed.returncode == OK, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["WHO", "WHEN", "KIND", "REASON", "STATE", "RESULT"] and len(lines) == 7
    set_line = next(line for line in lines if "lr_scale=0.5" in line)
    assert "team bot" in set_line and "acknowledged" in set_line and "applied at step 2: lr x0.5 from step 2" in set_line
    assert "refused at step 2: no pause here" in next(line for line in lines if " pause " in line)
    assert "delivered" in next(line for line in lines if "loss diverged" in line)
    # The table and --json read the same public list as the API.
    as_json = json.loads(runcast("runs", "commands", RUN, "--json", **env).stdout)
    assert as_json == client.get(f"{API}/runs/{RUN}/commands").json()


def test_bad_input_and_foreign_tokens_exit_non_zero_naming_the_flag_or_field(
        client: Any, db: Any, server: str, tokens: dict[str, str]) -> None:
    trainer = Trainer(client, tokens["ingest"], RUN)
    assert trainer.start().status_code == 202
    env = {"RUNCAST_SERVER": server}
    team = ["--token", tokens["team"]]
    before = _commands(db)
    cases = [
        (["stop", RUN, *team], USAGE, "--reason"),
        (["stop", RUN, "--reason", "   ", *team], USAGE, "--reason"),
        (["set", RUN, "lr_scale", "fast", "--reason", "r", *team], USAGE, "VALUE"),
        (["set", RUN, "lr_scale", "nan", "--reason", "r", *team], USAGE, "VALUE"),
        (["set", RUN, "lr_scale", "9", "--reason", "r", *team], USAGE, "(value)"),
        (["set", RUN, "momentum", "0.5", "--reason", "r", *team], USAGE, "(name)"),
        (["stop", "bad id!", "--reason", "r", *team], USAGE, "RUN"),
        (["stop", RUN, "--reason", "r", "--token", tokens["read"]], REFUSED, "'team' scope"),
        (["stop", RUN, "--reason", "r", "--token", tokens["other"]], NOT_FOUND, "(run)"),
        (["stop", RUN, "--reason", "r"], REFUSED, "401"),
    ]
    for args, status, named in cases:
        res = runcast("runs", *args, **env)
        assert res.returncode == status and named in res.stderr, (args, res.returncode, res.stderr)
    assert _commands(db) == before
    assert trainer.post({"type": "finished", "step": 1, "status": "finished"}).status_code == 202
    done = runcast("runs", "pause", RUN, *team, **env)
    assert done.returncode == FAILED and "409" in done.stderr and "(run)" in done.stderr, done.stderr
    assert _commands(db) == before
