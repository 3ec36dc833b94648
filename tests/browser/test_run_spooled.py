"""A run whose trainer left events in its local spool says so in its header, live: from the
trainer's report at a timed-out ``finish()`` until ``runcast sync`` has stored them, without a reload."""

from __future__ import annotations

import subprocess

import httpx
import services
from runcast.sender.spool import find_spools

from .conftest import open_run

STEPS = 120_000


def test_the_spooled_notice_lives_from_the_timed_out_finish_to_the_sync(live_server, page, tmp_path):
    run = live_server.sdk_run(name="spooled", system_metrics=False)
    for step in range(STEPS):
        run.log({"train/loss": 1.0 / (step + 1)}, step=step)
    run.finish(timeout=0.2)  # far less than the server needs for the burst
    detail = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}", timeout=30).json()
    spooled = detail["spooled_events"]
    assert spooled > 0 and detail["status"] == "running"
    open_run(page, live_server, run.id)
    assert page.is_visible("#run-spooled")
    assert f"{spooled:,} events of this run wait in its trainer's local spool" in page.text_content("#run-spooled")
    page.screenshot(path=str(tmp_path / "spooled.png"))

    [spool] = find_spools(live_server.spool)
    env = {**services.child_env(live_server.env), "RUNCAST_TOKEN": live_server.token("demo")}
    done = subprocess.run([str(services.BIN / "runcast"), "sync", str(spool), "-q"], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    page.wait_for_function("document.getElementById('run-spooled').hidden", timeout=45_000)
    page.wait_for_function("document.getElementById('run-status').textContent === 'finished'", timeout=45_000)
    assert page.text_content("#fact-step") == f"{STEPS - 1:,}"
    detail = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}", timeout=30).json()
    assert detail["spooled_events"] == 0 and detail["last_step"] == STEPS - 1
    assert page.errors == [] and page.dialogs == []
