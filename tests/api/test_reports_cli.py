"""``runcast reports …`` as the team runs it against ``runcast serve`` (HTTP only, a token with the
``team`` scope): a draft from the record, a new version from a file, publish, show, export,
unpublish; what the public sees at each step; a ``read`` token, another project's token and bad
flags refused with the server's words or the flag's name, and nothing written (docs/reports.md)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from api import test_runs_cli
from api.test_runs_cli import NOT_FOUND, OK, REFUSED, USAGE, runcast

server = test_runs_cli.server  # the fixture: `runcast serve` on the embedded database

CHART = """We lowered the learning rate.

```runcast-chart keys=loss from=1 to=3
```

<script>alert(1)</script>
"""


def _token(seed, project: str, scopes: list[str]) -> str:
    from runcast_server.core.auth import create_token

    with seed.db.scope() as session:
        return create_token(session, project, label="tests", scopes=scopes)


def test_the_team_drafts_edits_publishes_shows_and_exports_a_report(server, client, seed, tmp_path: Path) -> None:
    run = seed.run("pproj", name="public").start()
    run.log({"loss": [(1, 2.0), (2, 1.5), (3, 1.2)]})
    team = _token(seed, "pproj", ["read", "ingest", "team"])
    env = {"RUNCAST_SERVER": server, "RUNCAST_TOKEN": team}
    public = f"/api/v1/runs/{run.run}/reports"

    res = runcast("reports", "draft", run.run, "--from-step", "1", "--to-step", "3", "--title", "Week one", **env)
    assert res.returncode == OK, res.stderr
    assert res.stdout == f"report 1 drafted (version 1, draft): {server}/runs/{run.run}/reports/1\n"
    shown = runcast("reports", "show", run.run, "1", **env)
    assert shown.returncode == OK and "`loss`: 2 at step 1 -> 1.2 at step 3" in shown.stdout
    assert client.get(public).json()["reports"] == []  # a draft is the team's

    body = tmp_path / "body.md"
    body.write_text(CHART, encoding="utf-8")
    res = runcast("reports", "edit", run.run, "1", "--file", str(body), **env)
    assert res.returncode == OK, res.stderr
    assert res.stdout.startswith("report 1 saved (version 2, draft)")
    assert runcast("reports", "show", run.run, "1", **env).stdout == CHART
    assert runcast("reports", "show", run.run, "1", "--version", "1", **env).stdout != CHART

    res = runcast("reports", "publish", run.run, "1", "--version", "2", **env)
    assert res.returncode == OK and res.stdout.startswith("report 1 published (version 2, published)"), res.stderr
    anonymous = runcast("reports", "list", run.run, RUNCAST_SERVER=server)
    assert anonymous.stdout == "  1  published  steps 1-3  Week one\n"
    page = runcast("reports", "show", run.run, "1", RUNCAST_SERVER=server)  # no token: the published HTML
    assert page.returncode == OK and "runcast-block" in page.stdout and "<script" not in page.stdout
    assert "the team's" in page.stderr

    out = tmp_path / "report.html"
    res = runcast("reports", "export", run.run, "1", "-o", str(out), RUNCAST_SERVER=server)
    assert res.returncode == OK, res.stderr
    assert out.read_bytes() == httpx.get(f"{server}{public}/1/export.html", timeout=30).content
    assert b"Week one" in out.read_bytes() and b"Plotly" in out.read_bytes()

    res = runcast("reports", "unpublish", run.run, "1", "--json", **env)
    assert res.returncode == OK and json.loads(res.stdout)["state"] == "draft"
    assert client.get(public).json()["reports"] == []
    assert runcast("reports", "show", run.run, "1", RUNCAST_SERVER=server).returncode == NOT_FOUND


def test_refusals_name_the_flag_or_the_servers_field_and_write_nothing(server, client, seed, tmp_path: Path) -> None:
    run = seed.run("pproj", name="public").start()
    run.log({"loss": [(1, 2.0)]})
    private = seed.run("qproj", name="theirs").start(visibility="private")
    team = _token(seed, "pproj", ["read", "ingest", "team"])
    read = _token(seed, "pproj", ["read"])
    other = _token(seed, "qproj", ["read", "ingest", "team"])
    env = {"RUNCAST_SERVER": server}
    base = f"/api/v1/runs/{run.run}/reports"
    assert runcast("reports", "draft", run.run, "--from-step", "0", "--to-step", "1", "--token", team,
                   **env).returncode == OK
    body = tmp_path / "body.md"
    body.write_text("New words.\n", encoding="utf-8")

    # A read token: refused with the server's own message, for every write.
    for args in (["draft", run.run, "--from-step", "0", "--to-step", "1"], ["edit", run.run, "1", "--file", str(body)],
                 ["publish", run.run, "1"], ["unpublish", run.run, "1"]):
        res = runcast("reports", *args, "--token", read, **env)
        assert res.returncode == REFUSED, (args, res.stderr)
        assert "only the run's team" in res.stderr and "(Authorization)" in res.stderr, res.stderr
    # No token at all: refused (401), naming what is missing.
    res = runcast("reports", "publish", run.run, "1", **env)
    assert res.returncode == REFUSED and "401" in res.stderr
    # Another project's token: the run is its own business (403); its private run is not found.
    assert runcast("reports", "publish", run.run, "1", "--token", other, **env).returncode == REFUSED
    res = runcast("reports", "draft", private.run, "--from-step", "0", "--to-step", "1", "--token", team, **env)
    assert res.returncode == NOT_FOUND and "(run)" in res.stderr

    # Bad flags: the flag named, exit 2, nothing sent.
    res = runcast("reports", "draft", run.run, "--from-step", "5", "--to-step", "1", "--token", team, **env)
    assert res.returncode == USAGE and "--to-step" in res.stderr
    res = runcast("reports", "edit", run.run, "1", "--file", str(tmp_path / "missing.md"), "--token", team, **env)
    assert res.returncode == USAGE and "--file" in res.stderr
    (tmp_path / "empty.md").write_text("  \n", encoding="utf-8")
    res = runcast("reports", "edit", run.run, "1", "--file", str(tmp_path / "empty.md"), "--token", team, **env)
    assert res.returncode == USAGE and "--file" in res.stderr
    res = runcast("reports", "edit", run.run, "1", "--file", str(body), "--title", " ", "--token", team, **env)
    assert res.returncode == USAGE and "--title" in res.stderr
    res = runcast("reports", "export", run.run, "1", "-o", str(tmp_path / "no" / "such" / "r.html"), **env)
    assert res.returncode == USAGE and "--output" in res.stderr
    # A body the server refuses: its message and field, nothing written.
    body.write_text("```runcast-chart keys=loss from=x\n```\n", encoding="utf-8")
    res = runcast("reports", "edit", run.run, "1", "--file", str(body), "--token", team, **env)
    assert res.returncode == USAGE and "(body)" in res.stderr and "from=" in res.stderr
    res = runcast("reports", "publish", run.run, "1", "--version", "9", "--token", team, **env)
    assert res.returncode == NOT_FOUND and "(version)" in res.stderr
    versions = client.get(f"{base}/1/versions", headers={"Authorization": f"Bearer {team}"}).json()["versions"]
    assert len(versions) == 1
    assert client.get(base).json()["reports"] == []
    assert runcast("reports", "show", run.run, "7", "--token", team, **env).returncode == NOT_FOUND
