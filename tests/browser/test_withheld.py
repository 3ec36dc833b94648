"""The run page tells a public reader what the team withholds (the publication policy), and
says nothing when nothing is; the SDK sets the policy at init() and changes it mid-run."""

from __future__ import annotations

import httpx

from .conftest import open_run

# A reload draws the loss curve before it sets up the header and the controls (dashboard.md,
# "First load"): wait for them, not only for the first draw.
HEADER_SET_UP = "document.getElementById('fact-step').textContent !== ''"


def test_withheld_notice_follows_the_policy(live_server, page, tmp_path):
    run = live_server.sdk_run(name="partly public", config={"lr": 3e-4, "data_path": "mix-v2"},
                              policy={"metrics": ["train/*"], "config": ["lr"], "checkpoints": "metadata",
                                      "notes": "hidden"})
    for step in range(10):
        run.log({"train/loss": 2.0 / (step + 1), "val/loss": 2.5 / (step + 1)}, step=step)
    run.note("the team's private remark", step=5)
    assert run.flush(timeout=10)
    detail = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}", timeout=30).json()
    assert detail["keys"] == ["train/loss"] and detail["config"] == {"lr": 3e-4}

    open_run(page, live_server, run.id)
    assert page.is_visible("#run-withheld")
    items = page.eval_on_selector_all("#run-withheld li", "nodes => nodes.map(n => n.textContent)")
    assert items == ["metrics: only train/* published", "config: only lr published", "notes withheld by the team",
                     "checkpoints: metadata only"]
    assert "val/loss" not in page.text_content("#key-picker")
    assert "private remark" not in page.text_content("main")
    page.screenshot(path=str(tmp_path / "withheld.png"), full_page=False)

    # Mid-run, from the SDK: everything public again but the checkpoints' files.
    policy = run.set_policy(metrics="all", config=None, notes=None)
    assert policy["metrics"] == "all" and policy["checkpoints"] == "metadata"
    open_run(page, live_server, run.id)
    page.wait_for_function(HEADER_SET_UP)
    items = page.eval_on_selector_all("#run-withheld li", "nodes => nodes.map(n => n.textContent)")
    assert items == ["checkpoints: metadata only"]
    assert "val/loss" in page.text_content("#key-picker")

    run.set_policy(checkpoints=None)
    open_run(page, live_server, run.id)
    page.wait_for_function(HEADER_SET_UP)
    assert not page.is_visible("#run-withheld")
    run.finish(timeout=10)
    assert page.errors == [] and page.dialogs == []


def test_delay_notice_names_the_delay(live_server, page):
    """A delayed run tells its public readers how late they see it (and what it holds back: nothing yet)."""
    run = live_server.sdk_run(name="delayed", policy={"delay_s": 300})
    for step in range(5):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    assert run.flush(timeout=10)
    detail = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}", timeout=30).json()
    assert detail["publication"]["withheld"] == {"delay_s": 300}
    assert detail["keys"] == [] and detail["last_step"] is None  # nothing is 5 minutes old yet

    page.goto(f"{live_server.url}/runs/{run.id}")  # no chart to draw: nothing is due yet
    page.wait_for_selector("#run-delay", timeout=20000)
    assert page.is_visible("#run-withheld")
    assert page.text_content("#run-delay") == ("Delayed broadcast: public viewers see this run as it was 5 minutes ago; "
                                               "the team sees it live")
    assert page.eval_on_selector_all("#run-withheld li", "nodes => nodes.length") == 0

    run.set_policy(delay_s=None)  # lifted: everything at once, and no notice
    assert httpx.get(f"{live_server.url}/api/v1/runs/{run.id}", timeout=30).json()["keys"] == ["loss"]
    open_run(page, live_server, run.id)
    assert not page.is_visible("#run-withheld")
    run.finish(timeout=10)
    assert page.errors == [] and page.dialogs == []
