"""``runcast runs …`` and ``runcast token list|revoke`` as a user runs them against ``runcast serve``
(a laptop against a server: HTTP only), with their exit statuses (docs/cli.md); ``runcast sync``
of a missing directory; progress bars on a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import services

OK, FAILED, USAGE, NOT_FOUND, REFUSED = 0, 1, 2, 3, 4


@pytest.fixture
def server(client, embedded_env: Path, tmp_path: Path) -> Iterator[str]:
    proc, url = services.start_api({"RUNCAST_DATA_DIR": str(embedded_env)}, tmp_path / "api.log")
    try:
        yield url
    finally:
        proc.stop()


def runcast(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(services.BIN / "runcast"), *args], env=services.child_env(env), capture_output=True,
                          text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)


def test_runs_verbs_over_http(server, client, seed):
    public = seed.run("pproj", name="public").start()
    public.log({"loss": [(1, 2.0), (2, 1.5)]})
    private = seed.run("pproj", name="secret").start(visibility="private", config={"lr": 0.1})
    other = seed.run("qproj", name="theirs").start()
    p, q = seed.token("pproj"), seed.token("qproj")
    env = {"RUNCAST_SERVER": server}

    res = runcast("runs", "list", "--json", **env)
    assert res.returncode == OK, res.stderr
    assert {r["id"] for r in json.loads(res.stdout)["runs"]} == {public.run, other.run}
    res = runcast("runs", "list", "--json", "--project", "pproj", "--token", p, **env)
    listed = json.loads(res.stdout)
    assert [r["id"] for r in listed["runs"]] == [private.run, public.run] and listed["more"] is False
    res = runcast("runs", "list", "--limit", "1", "--json", **env)
    assert len(json.loads(res.stdout)["runs"]) == 1 and json.loads(res.stdout)["more"] is True
    table = runcast("runs", "list", "--token", p, **env).stdout
    assert private.run in table and "secret" in table and "ID" in table.splitlines()[0]

    res = runcast("runs", "show", private.run, "--json", "--token", p, **env)
    shown = json.loads(res.stdout)
    api = client.get(f"/api/v1/runs/{private.run}", headers={"Authorization": f"Bearer {p}"}).json()
    shown.pop("heartbeat_age_s"), api.pop("heartbeat_age_s")
    assert shown == api
    text = runcast("runs", "show", public.run, **env).stdout
    assert f"id          {public.run}" in text and "loss = 1.5 (step 2)" in text
    assert runcast("runs", "show", private.run, **env).returncode == NOT_FOUND  # hidden without its token

    res = runcast("runs", "rename", public.run, "better name", "--token", p, **env)
    assert (res.returncode, res.stdout) == (OK, f"run {public.run} renamed to 'better name'\n")
    res = runcast("runs", "tag", public.run, "--add", "baseline", "-a", "lr-sweep", "--token", p, "--json", **env)
    assert json.loads(res.stdout)["tags"] == ["baseline", "lr-sweep"]
    res = runcast("runs", "tag", public.run, "--remove", "baseline", "--token", p, **env)
    assert res.stdout == f"run {public.run} tags: lr-sweep\n"
    assert runcast("runs", "archive", public.run, "--token", p, **env).stdout == f"run {public.run} archived\n"
    assert public.run not in runcast("runs", "list", "--json", **env).stdout
    assert public.run in runcast("runs", "list", "--json", "--archived", "only", **env).stdout
    runcast("runs", "archive", public.run, "--restore", "--token", p, **env)
    assert client.get(f"/api/v1/runs/{public.run}").json()["archived_at"] is None

    # Another project's token: not found, nothing changed; no token: refused.
    for args in (["rename", private.run, "x"], ["archive", private.run], ["delete", private.run, "--yes"],
                 ["tag", other.run, "--add", "x"]):
        res = runcast("runs", *args, "--token", q if other.run not in args else p, **env)
        assert res.returncode == NOT_FOUND and "404" in res.stderr, (args, res.stderr)
        res = runcast("runs", *args, **env)
        assert res.returncode == REFUSED and "401" in res.stderr, (args, res.stderr)
    assert client.get(f"/api/v1/runs/{private.run}", headers={"Authorization": f"Bearer {p}"}).json()["name"] == "secret"

    res = runcast("runs", "delete", private.run, "--token", p, **env)  # standard input is not a terminal
    assert res.returncode == USAGE and "--yes" in res.stderr
    res = runcast("runs", "delete", private.run, "--yes", "--token", p, **env)
    assert (res.returncode, res.stdout) == (OK, f"run {private.run} deleted: 0 points, 1 segment(s), 1 timeline event(s)\n")
    assert client.get(f"/api/v1/runs/{private.run}", headers={"Authorization": f"Bearer {p}"}).status_code == 404


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["runs", "show", "not an id"], "RUN"),
        (["runs", "list", "--server", "ftp://host"], "--server"),
        (["runs", "list", "--status", "sleeping"], "--status"),
        (["runs", "list", "--limit", "0"], "--limit"),
        (["runs", "rename", "abcdefgh12", " "], "NAME"),
        (["runs", "tag", "abcdefgh12"], "--add"),
        (["runs", "tag", "abcdefgh12", "--add", "bad,tag"], "--add"),  # the SDK's rule, before any request
        (["token", "revoke", "0"], "ID"),
        (["sync", "/no/such/spool/dir"], "DIRECTORY"),
    ],
)
def test_bad_input_names_the_flag(args, flag):
    res = runcast(*args)
    assert res.returncode == USAGE, res.stderr
    assert flag in res.stderr


def test_an_unreachable_server_fails():
    res = runcast("runs", "list", "--server", f"http://127.0.0.1:{services.free_port()}")
    assert res.returncode == FAILED and "could not reach" in res.stderr


def test_token_list_and_revoke(db: Any, server, seed):
    from runcast_server.core.auth import create_token

    seed.run("pproj", name="a").start()
    keep = seed.token("pproj")
    with db.scope() as session:
        doomed = create_token(session, "pproj", label="laptop")
    env = {"RUNCAST_SERVER": server}

    res = runcast("token", "list", "--json", "--token", keep, **env)
    assert res.returncode == OK, res.stderr
    tokens = json.loads(res.stdout)["tokens"]
    assert [t["label"] for t in tokens] == ["tests", "laptop"]
    assert keep not in res.stdout and doomed not in res.stdout and doomed[10:] not in res.stdout
    table = runcast("token", "list", "--token", keep, **env).stdout
    assert doomed[:10] + "…" in table and "laptop" in table and doomed not in table

    doomed_id = tokens[1]["id"]
    res = runcast("token", "revoke", str(doomed_id), "--token", keep, **env)
    assert (res.returncode, res.stdout) == (OK, f"token {doomed_id} ({doomed[:10]}…) revoked\n")
    res = runcast("token", "list", "--token", doomed, **env)
    assert res.returncode == REFUSED and "invalid or revoked token" in res.stderr
    res = runcast("token", "revoke", "999999", "--token", keep, **env)
    assert res.returncode == NOT_FOUND


def _on_a_terminal(*args: str) -> tuple[int, str]:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([str(services.BIN / "runcast"), *args], stdin=follower, stdout=subprocess.PIPE,
                            stderr=follower, env=services.child_env({"COLUMNS": "120"}))
    os.close(follower)
    screen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    proc.communicate(timeout=300)
    os.close(leader)
    return proc.returncode, screen.decode(errors="replace")


def test_export_shows_progress_on_a_terminal_only(server, seed, tmp_path):
    run = seed.run("pproj", name="big").start()
    run.log({"loss": [(s, 1.0 / (s + 1)) for s in range(3000)]})
    code, screen = _on_a_terminal("export", run.run, "--server", server, "--format", "csv", "-o", str(tmp_path / "x.csv"))
    assert code == OK and "export" in screen and "kB" in screen
    res = runcast("export", run.run, "--server", server, "-o", str(tmp_path / "y.csv"))
    assert res.stderr == (f"wrote {(tmp_path / 'y.csv').stat().st_size} bytes to {tmp_path / 'y.csv'}\n"
                          f"wrote the run (name, config, summary, tags, times, segments) to {tmp_path / 'y.run.json'}\n")


def test_runs_policy_over_http(server, client, seed):
    run = seed.run("pproj", name="public").start()
    run.log({"train/loss": [(1, 2.0)], "val/loss": [(1, 2.5)]})
    p, q = seed.token("pproj"), seed.token("qproj")
    env = {"RUNCAST_SERVER": server}
    res = runcast("runs", "policy", run.run, "--metrics", "train/*,loss", "--checkpoints", "metadata", "--json",
                  "--token", p, **env)
    assert res.returncode == OK, res.stderr
    assert json.loads(res.stdout)["run_settings"] == {"metrics": ["train/*", "loss"], "checkpoints": "metadata"}
    assert client.get(f"/api/v1/runs/{run.run}").json()["keys"] == ["train/loss"]
    shown = runcast("runs", "policy", run.run, "--token", p, **env)
    assert shown.returncode == OK and "metrics      train/*,loss" in shown.stdout
    res = runcast("runs", "policy", run.run, "--reset", "metrics", "--json", "--token", p, **env)
    assert json.loads(res.stdout)["policy"]["metrics"] == "all"
    res = runcast("runs", "policy", "--project", "pproj", "--notes", "hidden", "--json", "--token", p, **env)
    assert res.returncode == OK and json.loads(res.stdout)["project_settings"] == {"notes": "hidden"}
    # Bad input: the flag is named, exit 2, nothing sent; another project's token: not found.
    bad = runcast("runs", "policy", run.run, "--code", "everything", "--token", p, **env)
    assert bad.returncode == USAGE and "--code" in bad.stderr
    assert runcast("runs", "policy", run.run, "--reset", "colour", "--token", p, **env).returncode == USAGE
    assert runcast("runs", "policy", run.run, "--notes", "hidden", "--token", q, **env).returncode == NOT_FOUND
    assert runcast("runs", "policy", "--notes", "hidden", "--token", p, **env).returncode == USAGE
    # The broadcast delay: seconds, checked before anything is sent.
    res = runcast("runs", "policy", run.run, "--delay-s", "90", "--json", "--token", p, **env)
    assert res.returncode == OK and json.loads(res.stdout)["policy"]["delay_s"] == 90, res.stderr
    assert client.get(f"/api/v1/runs/{run.run}").json()["keys"] == []  # nothing is 90 s old yet
    bad = runcast("runs", "policy", run.run, "--delay-s", "-5", "--token", p, **env)
    assert bad.returncode == USAGE and "--delay-s" in bad.stderr
    assert runcast("runs", "policy", run.run, "--reset", "delay_s", "--token", p, **env).returncode == OK
    assert client.get(f"/api/v1/runs/{run.run}").json()["keys"] == ["train/loss", "val/loss"]


def test_runs_list_keeps_every_column_when_a_run_has_many_tags(server, seed):
    """One run with 64 long tags used to squeeze the project, name, status, step and age columns
    out of every row; the tags column is cut instead, saying how many more there are."""
    tagged = seed.run("pproj", name="tagged").start(tags=[f"a-rather-long-tag-{i:02d}" for i in range(64)])
    plain = seed.run("pproj", name="plain").start()
    plain.log({"loss": [(7, 1.0)]})
    for width in ("80", "200"):
        table = runcast("runs", "list", RUNCAST_SERVER=server, COLUMNS=width).stdout.splitlines()
        header = table[0].split()
        assert header == ["ID", "PROJECT", "NAME", "STATUS", "STEP", "AGE", "TAGS"], table[0]
        rows = {line.split()[0]: line for line in table[1:]}
        assert {"pproj", "tagged", "running"} <= set(rows[tagged.run].split()), rows[tagged.run]
        assert "a-rather-long-tag-00" in rows[tagged.run]
        if width == "200":  # room for the whole cell: the first tag, and how many more
            assert rows[tagged.run].rstrip().endswith("a-rather-long-tag-00 +63"), rows[tagged.run]
        assert {"pproj", "plain", "running", "7"} <= set(rows[plain.run].split()), rows[plain.run]
