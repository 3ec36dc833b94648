"""A run whose SDK could not keep some events says so in its header (and its detail route)."""

from __future__ import annotations

import httpx

from .conftest import open_run


def test_a_hole_is_shown_in_the_run_header(live_server, page, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")  # the SDK cannot write its spool or overflow file here
    run = live_server.sdk_run(name="holed", max_queue=5, batch_size=1000, flush_interval=30.0,
                              spool_dir=str(blocker / "spool"))
    for step in range(20):
        run.log({"train/loss": 1.0 / (step + 1)}, step=step)
    run.finish(timeout=10)
    lost = run.stats.dropped  # how many depends on how fast the sender drained the queue meanwhile
    assert lost > 0 and run.stats.has_hole
    detail = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}", timeout=30).json()
    assert detail["lost_events"] == lost and detail["segments"][0]["lost_events"] == lost
    open_run(page, live_server, run.id)
    assert page.is_visible("#run-hole")
    assert f"{lost} events" in page.text_content("#run-hole")
    page.screenshot(path=str(tmp_path / "hole.png"))

    fine = live_server.sdk_run(name="whole")
    fine.log({"train/loss": 1.0}, step=0)
    fine.finish(timeout=10)
    open_run(page, live_server, fine.id)
    assert not page.is_visible("#run-hole")
    assert page.errors == [] and page.dialogs == []
