"""Every way the SDK resumes a run, then silence: each run gets its stall alert (issue 23).

Against a real server: ``runcast serve`` in the embedded default (SQLite; the check is the
app's own thread), and the production stack (PostgreSQL, Redis, ``runcast worker --beat``:
Celery beat sends the check). Trainer processes (resume_driver.py) start runs, die, and
resume them: after a finish, after a failure the SDK recorded, after a kill with no
finished event; with and without ``resume_step``; with a launch id; offline, and with the
server unreachable at ``init`` (both sent later with ``runcast sync``); a new run started
at a step; and a restart loop. Then everything goes quiet: every run, and a run never
resumed beside them, must get a stall alert, and the restart loop must close.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import services

from alerts.helpers import wait

pytestmark = pytest.mark.slow

PROJECT = "resumes"
DRIVER = Path(__file__).with_name("resume_driver.py")
# The loop's three resumes come from one driver, each a start, a step and a finish: 10 s holds
# them on a loaded machine (3 s did not, with the suite in four workers on two CPUs).
ALERTS = {"stall": {"after_s": 2}, "restart_loop": {"span_s": 10}}


@pytest.fixture(params=["embedded", pytest.param("production", marks=pytest.mark.services)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(url, token of PROJECT) of a server whose stall check runs every second."""
    check = {"RUNCAST_ALERT_CHECK_INTERVAL_S": "1"}
    if request.param == "embedded":
        procs = request.getfixturevalue("processes")
        env = {"RUNCAST_DATA_DIR": str(tmp_path / "server-data"), **check}
        token = procs.cli("token", "create", "--project", PROJECT, **env).stdout.strip().splitlines()[-1]
        procs.start_api(**env)
        return procs.api_url, token
    stack = request.getfixturevalue("stack")
    argv = [str(services.BIN / "runcast"), "worker", "--pool", "solo", "--concurrency", "1", "--beat"]
    worker = services.Process("worker-beat", argv, services.child_env({**stack.env, **check}),
                              stack.log_dir / "worker-beat.log")
    stack.processes.append(worker)
    services.wait_until(lambda: worker.check_alive("starting") or " ready." in worker.output(), 60,
                        "worker with beat to report ready", interval=0.2)
    stack.start_api(**check)
    return stack.api_url, stack.token(PROJECT)


def drive(url: str, token: str, runs: list[dict[str, Any]], tmp_path: Path) -> list[str]:
    """Run resume_driver.py on these runs (each with ALERTS); returns their ids."""
    spec = tmp_path / f"spec-{len(list(tmp_path.glob('spec-*')))}.json"
    for r in runs:
        r["init"] = {"project": PROJECT, "alerts": ALERTS, "dir": str(tmp_path / "spool"), **r["init"]}
    spec.write_text(json.dumps({"server": url, "token": token, "runs": runs}))
    res = subprocess.run([sys.executable, str(DRIVER), str(spec)], env=services.child_env({}), capture_output=True,
                         text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    return list(json.loads(res.stdout.strip().splitlines()[-1]))


def sync(url: str, token: str, spool: Path) -> None:
    res = subprocess.run([str(services.BIN / "runcast"), "sync", str(spool), "--server", url, "--token", token, "-q"],
                         env=services.child_env({}), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_every_kind_of_resumed_run_gets_its_stall_alert(server, tmp_path):
    url, token = server
    dead = f"http://127.0.0.1:{services.free_port()}"
    # The first segments: left running (killed), finished, or failed.
    first = {"never_resumed": None, "after_finish": "finished", "after_failure": "failed", "after_kill": None,
             "step_after_finish": "finished", "step_after_kill": None, "launch_id": "finished", "loop": None,
             "offline": "finished", "unreachable": "finished"}
    ids = dict(zip(first, drive(url, token, [{"init": {"name": n}, "steps": 10, "finish": f} for n, f in first.items()],
                                tmp_path)))
    # The resumes, in every form init() takes; each process dies with its runs open.
    resumes = [
        {"init": {"resume": ids["after_finish"]}},
        {"init": {"resume": ids["after_failure"]}},
        {"init": {"resume": ids["after_kill"]}},
        {"init": {"resume": ids["step_after_finish"], "resume_step": 4}},
        {"init": {"resume": ids["step_after_kill"], "resume_step": 4}},
        {"init": {"resume": ids["launch_id"]}, "env": {"RUNCAST_LAUNCH_ID": "launch-of-the-test"}},
        {"init": {"name": "new_at_step", "resume_step": 100}},
        *[{"init": {"resume": ids["loop"]}}] * 3,
        {"init": {"resume": ids["offline"], "mode": "offline", "dir": str(tmp_path / "offline")}},
        {"init": {"resume": ids["unreachable"], "server": dead, "dir": str(tmp_path / "unreachable")}},
    ]
    ids["new_at_step"] = drive(url, token, resumes, tmp_path)[6]
    for spool in ("offline", "unreachable"):
        sync(url, token, tmp_path / spool)

    api = httpx.Client(base_url=f"{url}/api/v1", timeout=30)
    segments = {name: len(api.get(f"/runs/{rid}").json()["segments"]) for name, rid in ids.items()}
    assert segments == {"never_resumed": 1, "new_at_step": 1, "loop": 4, **{n: 2 for n in first if n not in
                                                                               ("never_resumed", "loop")}}

    def stall_alerts() -> dict[str, list[str]]:
        return {name: [a["state"] for a in api.get(f"/runs/{rid}/alerts", params={"kind": "stall"}).json()["alerts"]]
                for name, rid in ids.items()}

    def everyone_alerted() -> bool:
        return all("open" in states for states in stall_alerts().values())

    # (A run killed before its resume may have stalled meanwhile: that alert closed with the resume.)
    wait(everyone_alerted, timeout=60, interval=0.5)
    assert {name: states.count("open") for name, states in stall_alerts().items()} == {name: 1 for name in ids}
    assert {r["id"] for r in api.get("/runs", params={"status": "stalled"}).json()["runs"]} == set(ids.values())

    def loop_closed() -> bool:
        loop = api.get(f"/runs/{ids['loop']}/alerts", params={"kind": "restart_loop"}).json()["alerts"]
        return [a["state"] for a in loop] == ["closed"]

    wait(loop_closed, timeout=45, interval=0.5)  # closed after span_s without a resume
