"""A run resumed from a checkpoint, on the run page: which points are the abandoned branch.

Resumed at ``resume_step=40`` (the checkpoint of step 40), segment 0's steps after 40 are
abandoned and its step 40 stays live, unless segment 1 logs step 40 itself: then segment 1's
value is the live one there. The charts and the data mix follow the same rule, and every point
the API returns is drawn once (live or abandoned) under its own segment.
"""

from __future__ import annotations

import httpx
import pytest

from .conftest import open_run
from .test_run_page import log_steps

TRACES = """() => document.getElementById('chart-main').data.filter(t => t.meta && t.meta.role === 'raw')
  .map(t => ({segment: t.meta.segment, abandoned: t.meta.abandoned, x: Array.from(t.x), y: Array.from(t.y)}))"""
MIX = """() => Object.fromEntries(document.getElementById('chart-mix').data.map(t => [t.name, [Array.from(t.x), Array.from(t.y)]]))"""


@pytest.mark.parametrize("relogged", [False, True], ids=["next-step", "step-relogged"])
def test_a_resume_at_a_checkpoint_keeps_its_step_live(live_server, page, relogged):
    run = live_server.sdk_run(name="checkpointed")
    for step, a in ((10, 1.0), (40, 2.0), (45, 5.0)):
        run.data_mix({"web": a, "code": 1.0}, step=step)
    log_steps(run, range(1, 51))
    run.finish("failed")
    resumed = live_server.sdk_run(name="checkpointed", resume=run.id, resume_step=40)
    if relogged:
        resumed.data_mix({"web": 7.0, "code": 1.0}, step=40)
    resumed.data_mix({"web": 3.0, "code": 1.0}, step=60)
    log_steps(resumed, range(40 if relogged else 41, 71))
    resumed.finish()
    open_run(page, live_server, run.id)
    page.wait_for_function("() => (document.getElementById('chart-mix').data || []).length === 2", timeout=20000)

    traces = page.evaluate(TRACES)
    kept0 = [t for t in traces if t["segment"] == 0 and not t["abandoned"]]
    gone0 = [t for t in traces if t["segment"] == 0 and t["abandoned"]]
    kept1 = [t for t in traces if t["segment"] == 1]
    last_kept = 39 if relogged else 40
    assert len(kept0) == len(gone0) == len(kept1) == 1
    assert kept0[0]["x"] == list(range(1, last_kept + 1))
    assert gone0[0]["x"] == list(range(last_kept, 51))  # forks from the last kept point
    assert kept1[0]["x"] == list(range(40 if relogged else 41, 71)) and not kept1[0]["abandoned"]

    # The page draws what the API returns, each point once under its own segment.
    answer = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}/metrics", params={"key": "train/loss"}, timeout=30).json()
    by_segment = {s["segment"]: dict(zip(s["step"], s["last"], strict=True)) for s in answer["series"]}
    drawn0 = dict(zip(kept0[0]["x"] + gone0[0]["x"], kept0[0]["y"] + gone0[0]["y"], strict=True))
    assert drawn0 == pytest.approx(by_segment[0])
    assert dict(zip(kept1[0]["x"], kept1[0]["y"], strict=True)) == pytest.approx(by_segment[1])

    # The data mix: segment 0's change at 45 is abandoned, its change at 40 is kept unless
    # segment 1 logged one at 40 too.
    mix = page.evaluate(MIX)
    steps, web = mix["web"]
    assert steps[:3] == [10, 40, 60]
    assert web[:3] == [1.0, 7.0 if relogged else 2.0, 3.0]
    assert page.errors == [] and page.dialogs == []
