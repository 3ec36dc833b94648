"""Renaming a live run from the SDK (W&B's ``run.name = ...``, ``run.tags``, ``run.notes``,
``run.group``) while its page and the runs list are open: both show the new values without a
reload (the run page through the live stream, well before its 30 s poll), and after a reload,
equal to ``GET /api/v1/runs/{id}``. A hostile name is text, never markup."""

from __future__ import annotations

import httpx

from .conftest import open_run
from .test_run_page import HOSTILE, log_steps

SHOWN = """() => {
  const rows = Object.fromEntries([...document.querySelectorAll('#config table tr')]
    .map(tr => [...tr.children].map(td => td.textContent)));
  const notes = document.querySelector('#config .run-notes');
  return {name: document.getElementById('run-name').textContent, title: document.title,
          tags: rows['tags'], group: rows['group'], notes: notes ? notes.textContent : null};
}"""
ROW = """(id) => { const a = document.querySelector(`#runs a[href="/runs/${id}"]`); const td = a && a.closest('td');
  return td ? {name: a.textContent, chips: [...td.querySelectorAll('.chip')].map(c => c.textContent)} : null; }"""


def expected(body: dict) -> dict:  # type: ignore[type-arg]
    return {"name": body["name"], "title": f"{body['name']} · {body['project']} · Runcast",
            "tags": ", ".join(body["tags"]), "group": body["group"], "notes": body["notes"]}


def test_sdk_rename_shows_live_on_the_run_page_and_the_runs_list(live_server, page, browser):
    run = live_server.sdk_run(name="before", tags=["first"])
    log_steps(run, range(1, 21))
    listing = browser.new_context().new_page()
    listing_errors: list[str] = []
    listing.on("pageerror", lambda e: listing_errors.append(str(e)))
    listing.goto(live_server.url + "/")
    listing.wait_for_function(ROW, arg=run.id, timeout=20000)
    open_run(page, live_server, run.id)
    page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
    assert page.evaluate(SHOWN)["name"] == "before"

    run.name = HOSTILE + " renamed"
    run.tags = ["second", "lr-high"]
    run.notes = "lr too high"
    run.group = "sweep-1"
    assert run.flush(timeout=20)
    body = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}", timeout=30).json()
    assert (body["name"], body["tags"], body["notes"], body["group"]) == (
        HOSTILE + " renamed", ["lr-high", "second"], "lr too high", "sweep-1")
    want = expected(body)
    page.wait_for_function(f"() => ({SHOWN})().notes === 'lr too high'", timeout=10000)  # the stream, not the poll
    assert page.evaluate(SHOWN) == want
    listing.wait_for_function(f"(id) => ({ROW})(id).name === {HOSTILE + ' renamed'!r}", arg=run.id, timeout=15000)
    assert listing.evaluate(ROW, run.id) == {"name": want["name"], "chips": ["sweep-1", "lr-high", "second"]}

    # Points logged after the rename still stream in, and a reload shows the same.
    log_steps(run, range(21, 31))
    page.wait_for_function("document.getElementById('fact-step').textContent === '30'", timeout=10000)
    open_run(page, live_server, run.id)
    page.wait_for_function("document.querySelector('#config .run-notes') !== null", timeout=10000)
    assert page.evaluate(SHOWN) == want
    assert page.errors == [] and page.dialogs == [] and listing_errors == []
