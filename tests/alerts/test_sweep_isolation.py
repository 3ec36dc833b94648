"""The periodic stall check after resumes, and with one run it cannot check.

A resume with ``resume_step`` leaves a run-level ``restart_loop`` state row; the check
once failed on every cycle as soon as one existed (issue 23), for every run of the
server. Each run is now checked in a savepoint of its own: a run whose state is unreadable,
or whose writes the database refuses, is logged and counted, and the others get their
alerts. On SQLite and on PostgreSQL (where one failed statement would otherwise abort
the whole transaction).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text, update

from alerts.helpers import WireRun, post

AFTER_S = 60
SPAN_S = 120


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def client(request: pytest.FixtureRequest, embedded_env: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The embedded app (no Redis: eager tasks, the embedded check) on SQLite or on PostgreSQL."""
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app

    if request.param == "postgresql":
        monkeypatch.setenv("RUNCAST_DATABASE_URL", request.getfixturevalue("pg_url"))
    monkeypatch.setenv("RUNCAST_ALERT_CHECK_INTERVAL_S", "3600")  # only the test sweeps
    with TestClient(create_app()) as c:
        yield c


def _token(client: Any) -> str:
    from runcast_server.core.auth import create_token

    with client.app.state.context.database.scope() as s:
        return create_token(s, "demo")


def _started(client: Any, token: str, name: str) -> WireRun:
    run = WireRun(name=name)
    post(client, token, [run.started(alerts={"stall": {"after_s": AFTER_S}, "restart_loop": {"span_s": SPAN_S}}),
                         run.metrics(0, loss=2.0), run.metrics(1, loss=1.9)])
    return run


def _resume(client: Any, token: str, run: WireRun, step: int) -> None:
    post(client, token, [run.resume(step, alerts={"stall": {"after_s": AFTER_S}, "restart_loop": {"span_s": SPAN_S}}),
                         run.metrics(step, loss=1.8)])


def _alerts(client: Any, run: WireRun, kind: str) -> list[str]:
    return [a["state"] for a in client.get(f"/api/v1/runs/{run.run}/alerts", params={"kind": kind}).json()["alerts"]]


def test_a_resumed_run_no_longer_stops_the_check_for_every_run(client):
    """The issue's report: one resume with resume_step, then no stall alert for any run."""
    from runcast_server.alerts.stall import sweep

    token = _token(client)
    plain = _started(client, token, "plain")
    resumed = _started(client, token, "resumed")
    _resume(client, token, resumed, 1)
    ctx = client.app.state.context
    assert sweep(ctx, now=time.time() + AFTER_S / 2) == 0
    assert sweep(ctx, now=time.time() + AFTER_S * 2) == 2
    assert _alerts(client, plain, "stall") == _alerts(client, resumed, "stall") == ["open"]
    assert sweep(ctx, now=time.time() + AFTER_S * 3) == 0  # one alert per stall


def test_one_run_that_cannot_be_checked_does_not_stop_the_others(client, caplog):
    from runcast_server.alerts.models import DetectorState
    from runcast_server.alerts.stall import sweep

    token = _token(client)
    ctx = client.app.state.context
    plain = _started(client, token, "plain")
    resumed = _started(client, token, "resumed")
    _resume(client, token, resumed, 1)
    looping, corrupt = _started(client, token, "looping"), _started(client, token, "corrupt")
    for run in (looping, corrupt):
        for _ in range(3):
            _resume(client, token, run, 1)
        assert _alerts(client, run, "restart_loop") == ["open"]
    refused = _started(client, token, "refused")
    with ctx.database.scope() as s:
        # corrupt's restart-loop state is no longer an object: its quiet check cannot read it
        s.execute(update(DetectorState).where(DetectorState.run_id == corrupt.run,
                                              DetectorState.detector == "restart_loop").values(state="garbage"))
        _refuse_versions_of(s, refused.run)  # the database refuses refused's next version, its check's last write

    with caplog.at_level(logging.ERROR, logger="runcast_server.alerts.stall"):
        changed = sweep(ctx, now=time.time() + max(AFTER_S, SPAN_S) * 2)
    assert changed == 5  # stalls of plain, resumed, looping, corrupt; looping's restart loop closed
    for run in (plain, resumed, looping, corrupt):
        assert _alerts(client, run, "stall") == ["open"], run.name
    assert _alerts(client, refused, "stall") == []  # rolled back to its savepoint: no alert, no anomaly event
    assert [e["type"] for e in client.get(f"/api/v1/runs/{refused.run}/events").json()["events"]
            if e["type"] == "anomaly"] == []
    assert _alerts(client, looping, "restart_loop") == ["closed"]
    assert _alerts(client, corrupt, "restart_loop") == ["open"]  # its check failed: left as it was
    failures = {(r.args[0], r.args[1]) for r in caplog.records if r.exc_info}
    assert failures == {("stall", refused.run), ("restart_loop", corrupt.run)}
    registry = client.app.state.metrics.registry
    for check in ("stall", "restart_loop"):
        assert registry.get_sample_value("runcast_alert_check_errors_total", {"check": check}) == 1

    # The next cycle still checks everyone: refused gets its alert once the database takes it.
    with ctx.database.scope() as s:
        s.execute(text("DROP TRIGGER refuse_version" + ("" if s.get_bind().dialect.name == "sqlite" else " ON run_versions")))
    assert sweep(ctx, now=time.time() + max(AFTER_S, SPAN_S) * 3) == 1
    assert _alerts(client, refused, "stall") == ["open"]


def _refuse_versions_of(session: Any, run_id: str) -> None:
    """A trigger that makes the database refuse any new version of ``run_id`` (the run_versions log)."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(text(f"CREATE TRIGGER refuse_version BEFORE INSERT ON run_versions WHEN NEW.run_id = '{run_id}' "
                             "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"))
        return
    session.execute(text(f"CREATE FUNCTION refuse_version() RETURNS trigger AS $$ BEGIN IF NEW.run_id = '{run_id}' "
                         "THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql"))
    session.execute(text("CREATE TRIGGER refuse_version BEFORE INSERT ON run_versions "
                         "FOR EACH ROW EXECUTE FUNCTION refuse_version()"))
