"""The embedded default end to end: `runcast serve` with only RUNCAST_DATA_DIR (SQLite, eager
tasks, no Redis), the SDK logging over HTTP, REST reading back every value exactly."""

from __future__ import annotations

import math
from typing import Any

from services import BIN, child_env, runcast_has_command

from integration.helpers import (
    SPECIAL,
    Driver,
    WireRun,
    export_rows,
    get_run,
    raw_metric,
    same,
    value_at,
)

STEPS, METRICS = 200, 2


def make_token(env: dict[str, str], project: str, data_dir) -> str:
    """A token through `runcast token create` once it exists, else through the auth module."""
    import subprocess

    if runcast_has_command("token"):
        res = subprocess.run([str(BIN / "runcast"), "token", "create", "--project", project],
                             env=child_env(env), check=False, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        return [w for w in res.stdout.split() if w.startswith("rc_")][-1]
    from runcast_server.core.auth import create_token
    from runcast_server.core.db import make_engine
    from sqlalchemy.orm import Session

    engine = make_engine(f"sqlite:///{data_dir / 'runcast.db'}")
    try:
        with Session(engine) as session:
            token = create_token(session, project)
            session.commit()
        return token
    finally:
        engine.dispose()


def test_runcast_serve_embedded_with_sdk(processes):
    import httpx

    data_dir = processes.tmp / "data"
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir)}
    processes.start_api()
    url = processes.api_url
    assert httpx.get(f"{url}/healthz", timeout=30).json()["mode"] == "embedded"
    token = make_token(processes.env, "embedded", data_dir)
    driver = Driver(processes, server=url, token=token, project="embedded", steps=STEPS, metrics=METRICS,
                    extra=["--special"])
    driver.wait()
    rows = export_rows(url, driver.run_id, token)
    got = {(r["key"], r["step"]): r["value"] for r in rows}
    assert len(rows) == len(got) == STEPS * METRICS
    for step in range(STEPS):
        for k in range(METRICS):
            want = SPECIAL[step] if (k == 0 and step in SPECIAL) else value_at(step, k)
            assert same(got[(f"m{k}", step)], want), (k, step)
    raw = dict(raw_metric(url, driver.run_id, "m0", 0, STEPS - 1, token))
    assert math.isnan(raw[7]) and raw[11] == math.inf and raw[13] == -math.inf
    assert get_run(url, driver.run_id, token).json()["status"] == "finished"
    assert (data_dir / "runcast.db").exists()


def test_embedded_app_in_process_ingest_and_read(db: Any, embedded):
    """The `embedded` fixture: TestClient on create_app(), eager ingest, reads."""
    from runcast.wire import events as ev
    from runcast_server.core.auth import create_token
    from sqlalchemy.orm import Session

    with Session(db.engine) as session:
        token = create_token(session, "inproc")
        session.commit()
    run = WireRun("inproc")
    events = [run.started()] + [run.metrics(s, {"loss": value_at(s)}) for s in range(50)]
    events.append(run.metrics(50, {"loss": math.nan}))
    r = embedded.post("/api/v1/ingest", content=ev.dumps_batch(events),
                      headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert r.status_code == 202, r.text
    r = embedded.get(f"/api/v1/runs/{run.run}/metrics", params={"key": "loss", "max_points": 20000})
    assert r.status_code == 200, r.text
    [series] = r.json()["series"]
    assert series["step"] == list(range(51))
    values = [ev.decode_value(v) for v in series["last"]]
    assert all(same(v, value_at(s)) for s, v in zip(range(50), values))
    assert math.isnan(values[50])
