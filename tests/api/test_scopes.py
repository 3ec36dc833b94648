"""Token scopes from the caller's seat: a ``read`` token reads and cannot ingest or manage, an
``ingest`` token (a trainer's) sends runs and cannot read private ones, delete them or change a
policy, a ``team`` token manages (and reads); each refusal is a 403 naming ``Authorization`` and the missing scope, and writes
nothing. Another project's token with every scope still finds nothing (404). ``runcast.init``
with a token that cannot ingest stops with a clear error; the CLI makes scoped tokens."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import runcast
from artifacts.live import LiveServer
from runcast.handshake import InitError
from runcast_server.core.auth import create_token
from sqlalchemy import text
from typer.testing import CliRunner

API = "/api/v1"


@pytest.fixture
def world(client: Any, seed: Any, db: Any) -> dict[str, Any]:
    run = seed.run("pp", name="mine").start(visibility="private")
    run.log({"loss": [(1, 2.0), (2, 1.5)]})
    theirs = seed.run("qq", name="theirs").start(visibility="private")
    with db.scope() as session:
        tokens = {scope: create_token(session, "pp", label=scope, scopes=[scope]) for scope in ("read", "ingest", "team")}
        tokens["all"] = create_token(session, "pp")
        tokens["q_all"] = create_token(session, "qq")
    return {"run": run.run, "segment": run.segment, "theirs": theirs.run, "tokens": tokens}


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _metrics(run: str, segment: str, step: int) -> dict[str, Any]:
    return {"v": 1, "events": [{"v": 1, "type": "metrics", "run": run, "segment": segment, "seq": step,
                                "ts": 1.0, "step": step, "values": {"loss": 1.0}}]}


def _calls(w: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(scope needed, method, path, request kwargs) of every route a token's scope guards."""
    run, seg = w["run"], w["segment"]
    return [
        ("read", "GET", f"{API}/runs/{run}", {}),
        ("read", "GET", f"{API}/runs/{run}/policy", {}),
        ("read", "GET", f"{API}/projects/pp/policy", {}),
        ("ingest", "POST", f"{API}/ingest", {"json": _metrics(run, seg, 3)}),
        ("ingest", "POST", f"{API}/runs/{run}/uploads", {"json": {}}),
        ("ingest", "PUT", f"{API}/runs/{run}/uploads/u/files/0", {"content": b"x"}),
        ("ingest", "POST", f"{API}/runs/{run}/uploads/u/complete", {"json": {}}),
        ("ingest", "HEAD", f"{API}/runs/{run}/blobs/{'0' * 64}", {}),
        ("ingest", "PUT", f"{API}/runs/{run}/blobs/{'0' * 64}", {"content": b"x"}),
        ("ingest", "PUT", f"{API}/runs/{run}/segments/{seg}/spool", {"json": {}}),
        ("team", "PATCH", f"{API}/runs/{run}", {"json": {"name": "renamed"}}),
        ("team", "PUT", f"{API}/runs/{run}/policy", {"json": {"notes": "hidden"}}),
        ("team", "PUT", f"{API}/projects/pp/policy", {"json": {"notes": "hidden"}}),
        ("team", "PUT", f"{API}/runs/{run}/alerts/config", {"json": {"spike": {"k": 5}}}),
        ("team", "GET", f"{API}/tokens", {}),
        ("team", "DELETE", f"{API}/tokens/999999", {}),
        ("team", "GET", f"{API}/projects/pp/members", {}),
        ("team", "DELETE", f"{API}/runs/{run}", {}),  # last: it deletes the run
    ]


def _state(db: Any) -> tuple[Any, ...]:
    with db.engine.connect() as conn:
        return (conn.execute(text("SELECT name, last_step FROM runs ORDER BY id")).all(),
                conn.execute(text("SELECT COUNT(*) FROM policies")).scalar() if _has(conn, "policies") else None,
                conn.execute(text("SELECT COUNT(*) FROM ingest_tokens WHERE revoked_at IS NOT NULL")).scalar())


def _has(conn: Any, table: str) -> bool:
    from sqlalchemy import inspect
    return table in inspect(conn).get_table_names()


def test_each_scope_on_each_route(client: Any, db: Any, world: dict[str, Any]) -> None:
    tokens = world["tokens"]
    for needed, method, path, kwargs in _calls(world):
        for scope in ("read", "ingest", "team"):
            if scope == needed or (needed, scope) == ("read", "team"):  # managing includes reading
                continue
            before = _state(db)
            res = client.request(method, path, headers=_h(tokens[scope]), **kwargs)
            assert res.status_code == 403, (scope, method, path, res.status_code, res.text)
            if method != "HEAD":
                error = res.json()["error"]
                assert error["field"] == "Authorization" and f"'{needed}'" in error["message"], error
            assert _state(db) == before, (scope, method, path)  # a refusal writes nothing
        res = client.request(method, path, headers=_h(tokens[needed]), **kwargs)
        assert res.status_code not in (401, 403), (needed, method, path, res.status_code, res.text)
        if (method, path) == ("POST", f"{API}/ingest"):
            assert res.status_code == 202, res.text
        if method == "PATCH":
            assert res.status_code == 200 and res.json()["name"] == "renamed"
        if method == "DELETE" and "/runs/" in path:
            assert res.status_code == 200, res.text


def test_another_projects_token_with_every_scope_finds_nothing(client: Any, world: dict[str, Any]) -> None:
    q = _h(world["tokens"]["q_all"])
    for needed, method, path, kwargs in _calls(world):
        if needed == "ingest" or path.endswith(("/tokens", "/tokens/999999")):
            continue  # a trainer's routes and tokens: test_walls.py walks them with another project's token
        res = client.request(method, path, headers=q, **kwargs)
        assert res.status_code == 404, (method, path, res.status_code, res.text)
    assert client.get(f"{API}/runs/{world['run']}", headers=_h(world["tokens"]["all"])).status_code == 200


def test_whoami_reports_the_scopes_and_tokens_are_stored_hashed(client: Any, db: Any, world: dict[str, Any]) -> None:
    for scope in ("read", "ingest", "team"):
        res = client.get(f"{API}/whoami", headers=_h(world["tokens"][scope]))
        assert res.status_code == 200 and res.json()["scopes"] == [scope] and res.json()["project"] == "pp"
    assert client.get(f"{API}/whoami", headers=_h(world["tokens"]["all"])).json()["scopes"] == ["read", "ingest", "team"]
    with db.engine.connect() as conn:
        rows = conn.execute(text("SELECT token_hash, prefix, scopes, label FROM ingest_tokens")).all()
    by_label = {r.label: r for r in rows}
    for scope in ("read", "ingest", "team"):
        secret = world["tokens"][scope]
        row = by_label[scope]
        assert row.token_hash == hashlib.sha256(secret.encode()).hexdigest() and row.scopes == scope
        assert all(secret not in str(value) for r in rows for value in r)


def test_runcast_init_with_a_token_that_cannot_ingest_says_so(client: Any, world: dict[str, Any]) -> None:
    with LiveServer(client.app) as server:
        with pytest.raises(InitError, match="lacks the 'ingest' scope.*--scope ingest"):
            runcast.init(project="pp", server=server.url, token=world["tokens"]["read"], mode="online")
        run = runcast.init(project="pp", server=server.url, token=world["tokens"]["ingest"], mode="online")
        run.log({"loss": 1.0}, step=1)
        run.finish()
        assert client.get(f"{API}/runs/{run.id}", headers=_h(world["tokens"]["read"])).json()["last_step"] == 1


def test_cli_makes_scoped_tokens_and_names_the_flag_on_a_bad_scope(embedded_env: Any, tmp_path: Any) -> None:
    from runcast.cli.app import app
    from runcast_server.core.auth import token_grant
    from runcast_server.core.db import Database
    from runcast_server.core.settings import Settings

    runner = CliRunner()
    made = runner.invoke(app, ["token", "create", "--project", "pp", "--scope", "read", "--scope", "ingest"])
    assert made.exit_code == 0, made.output
    comma = runner.invoke(app, ["token", "create", "--project", "pp", "--scope", "team,read"])
    default = runner.invoke(app, ["token", "create", "--project", "pp"])
    bad = runner.invoke(app, ["token", "create", "--project", "pp", "--scope", "write"])
    assert bad.exit_code != 0 and "--scope" in bad.output and "'write'" in bad.output
    db = Database.open(Settings().sqlalchemy_url)
    try:
        with db.scope() as session:
            def scopes(out: str) -> tuple[str, ...]:
                grant = token_grant(session, out.strip().splitlines()[0])
                assert grant is not None
                return grant.scopes
            assert scopes(made.stdout) == ("read", "ingest")
            assert scopes(comma.stdout) == ("read", "team")
            assert scopes(default.stdout) == ("read", "ingest", "team")
    finally:
        db.engine.dispose()
