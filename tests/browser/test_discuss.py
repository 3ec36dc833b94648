"""Threads started from the run page's panels (docs/comments.md): Alice, signed in, starts a
thread on a checkpoint from its row's "Discuss"; an anonymous page open on the same run sees the
row's count go up without a reload and opens the thread from it. The sample and the
evaluation panels carry the same control; a panel the publication policy withholds carries
none (it is not there)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from .conftest import LiveServer, open_run
from .test_comments import PASSWORD, Person
from .test_oidc import _runcast
from .test_run_artifacts import storage
from .test_signin import _log, _shots

CHECKPOINT = "#checkpoints li.ck-available button.discuss"


def test_a_thread_started_on_a_checkpoint_row_reaches_an_anonymous_page(
        live_server: LiveServer, browser: Any, page: Any, tmp_path: Path) -> None:
    run = live_server.sdk_run(name="discussed")
    ckpt = storage(live_server) / "discussed" / "step20.pt"
    ckpt.parent.mkdir()
    ckpt.write_bytes(b"weights")
    _log(run, range(1, 31))
    run.checkpoint(ckpt, step=20)
    run.log_samples([{"prompt": "The capital of France is", "output": " Paris."}], step=20)
    run.log_eval({"hellaswag": {"acc": 0.31}}, step=20, suite="lm-eval-harness")
    assert run.flush(timeout=20)
    _runcast(live_server, "user", "create", "alice", "--display-name", "Alice", "--password-stdin", stdin=PASSWORD + "\n")
    alice = Person(browser, live_server, "alice")
    try:
        alice.open_run(run.id)
        open_run(page, live_server, run.id)
        page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=20000)
        for p in (alice.page, page):
            p.wait_for_selector(CHECKPOINT)
            assert p.text_content(CHECKPOINT) == "Discuss"
            assert p.get_attribute(CHECKPOINT, "aria-label") == "Discuss checkpoint at step 20"
        # The sample and the evaluation have theirs (the evaluation's an icon in its cell).
        page.wait_for_selector("#sample-view button.discuss[data-discuss-kind=sample]")
        page.wait_for_selector("#evals button.discuss-mini[data-discuss-kind=eval] svg")
        evaluation = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}/evals", timeout=30).json()["evals"][0]
        assert page.get_attribute("#evals button.discuss-mini", "aria-label") == \
            f"Discuss evaluation #{evaluation['id']} at step 20"

        # Anonymous, with no thread yet: asked to sign in, no form.
        page.click(CHECKPOINT)
        page.wait_for_function("document.getElementById('comments-error').textContent !== ''")
        assert page.text_content("#comments-error") == "Sign in to start a thread on checkpoint at step 20."
        assert page.query_selector("#comment-new") is None

        # Alice starts the thread from the row.
        alice.page.click(CHECKPOINT)
        alice.page.wait_for_selector("#comment-new")
        assert alice.page.text_content("#comment-new .comment-anchor") == "Start a thread on checkpoint at step 20"
        alice.page.fill("#comment-new-body", "Is this the one to **fine-tune** from?")
        with alice.page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/comments")) as posted:
            alice.page.click("#comment-new button[type=submit]")
        assert posted.value.status == 201, posted.value.text()
        made = posted.value.json()
        checkpoints = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}/checkpoints", timeout=30).json()["checkpoints"]
        assert made["anchor"] == {"kind": "checkpoint", "key": None, "id": checkpoints[0]["id"], "step": 20}
        alice.page.wait_for_function(f"document.querySelector({CHECKPOINT!r}).textContent === 'Discuss (1)'")

        # The anonymous page: the count goes up live (no reload), as the API counts.
        page.wait_for_function(f"document.querySelector({CHECKPOINT!r}).textContent === 'Discuss (1)'", timeout=10000)
        listed = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}/comments", timeout=30).json()["comments"]
        assert [c["id"] for c in listed if c["anchor"]["kind"] == "checkpoint" and c["state"] == "visible"] == [made["id"]]
        page.click(CHECKPOINT)
        page.wait_for_selector(f"#comment-{made['id']}.target")
        assert page.inner_html(f"#comment-{made['id']} .comment-body").strip() == \
            "<p>Is this the one to <strong>fine-tune</strong> from?</p>"
        assert page.text_content(f"#comment-{made['id']} .comment-anchor").startswith("checkpoint at step 20")
        assert page.text_content("#comments-error") == ""  # the earlier sign-in note is gone
        shots = _shots(tmp_path)
        page.screenshot(path=str(shots / "discuss-anonymous.png"), full_page=True)
        page.locator("#comments-card").screenshot(path=str(shots / "discuss-comments-card.png"))
        page.locator("#checkpoints-card").screenshot(path=str(shots / "discuss-checkpoint-row.png"))
        page.locator("#evals-card").screenshot(path=str(shots / "discuss-evals.png"))
        assert alice.errors == []
    finally:
        alice.close()


def test_a_withheld_panel_has_no_discuss_control(live_server: LiveServer, page: Any) -> None:
    run = live_server.sdk_run(name="withheld", policy={"checkpoints": "none"})
    ckpt = storage(live_server) / "withheld" / "step5.pt"
    ckpt.parent.mkdir()
    ckpt.write_bytes(b"weights")
    _log(run, range(1, 11))
    run.checkpoint(ckpt, step=5)
    assert run.flush(timeout=20)
    open_run(page, live_server, run.id)
    page.wait_for_selector("#checkpoints li.empty")
    page.wait_for_selector("#comments .comment-threads")
    assert page.query_selector("button.discuss[data-discuss-kind=checkpoint]") is None
