"""A training report from the reader's seat: the team publishes a report with a live chart on a
running run; it appears in the Reports card of a reader's open run page without a reload; the
reader opens its page from there and sees the chart, which
grows as the run goes on; the report's static export, opened from disk in a Chromium with every
network request refused, shows the same chart."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx

from .conftest import LiveServer

TRACE_POINTS = """() => {
  const gd = document.querySelector('.runcast-block[data-block="chart"] .runcast-chart');
  return gd && gd.data ? gd.data.map(t => [t.name, t.x.length]) : null;
}"""
BODY = """Loss over the first steps.

```runcast-chart keys=loss
```

<script>window.__pwned = true</script>
"""


def _shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("REPORT_SHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _wait_points(server: LiveServer, run_id: str, n: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        last = httpx.get(f"{server.url}/api/v1/runs/{run_id}", timeout=30).json().get("last_step")
        if last is not None and last >= n - 1:
            return
        time.sleep(0.2)
    raise AssertionError("the run's points did not arrive")


def test_a_published_report_draws_its_live_chart_and_its_export_opens_offline(
        live_server: LiveServer, page: Any, browser: Any, tmp_path: Path) -> None:
    run = live_server.sdk_run(name="reported")
    for step in range(20):
        run.log({"loss": 3.0 - step * 0.05}, step=step)
    _wait_points(live_server, run.id, 20)
    team = {"Authorization": f"Bearer {live_server.token()}"}
    api = f"{live_server.url}/api/v1/runs/{run.id}/reports"
    made = httpx.post(api, json={"title": "Week one", "body": BODY, "from_step": 0, "to_step": 40}, headers=team, timeout=30)
    assert made.status_code == 201, made.text
    # A reader on the run page sees the report appear in its Reports card when it is published.
    page.goto(f"{live_server.url}/runs/{run.id}")
    page.wait_for_function("window.__runcast && window.__runcast.stream && window.__runcast.stream.open",
                           timeout=20000)
    page.wait_for_selector("#reports li.empty")
    assert httpx.post(f"{api}/1/publish", json={}, headers=team, timeout=30).status_code == 200
    page.wait_for_selector("#reports a")
    assert page.text_content("#reports a") == "Week one"
    page.click("#reports a")
    page.wait_for_url(f"**/runs/{run.id}/reports/1")
    page.wait_for_function(f"({TRACE_POINTS})() && ({TRACE_POINTS})()[0][1] === 20", timeout=20000)
    assert page.text_content("#report-title") == "Week one"
    assert page.evaluate("window.__pwned") is None
    assert "window.__pwned" in page.text_content("#report-body")  # shown as text
    # The chart follows the run: new steps appear without a reload.
    for step in range(20, 30):
        run.log({"loss": 2.0 - step * 0.01}, step=step)
    page.wait_for_function(f"({TRACE_POINTS})()[0][1] === 30", timeout=20000)
    page.screenshot(path=str(_shots(tmp_path) / "report-page.png"), full_page=True)

    # The static export, opened from disk with the network refused, shows the same chart.
    exported = httpx.get(f"{api}/1/export.html", timeout=30)
    assert exported.status_code == 200
    path = tmp_path / "report.html"
    path.write_bytes(exported.content)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
    asked: list[str] = []
    context.route("**/*", lambda route: (asked.append(route.request.url), route.abort())
                  if not route.request.url.startswith("file://") else route.continue_())
    offline = context.new_page()
    errors: list[str] = []
    offline.on("pageerror", lambda e: errors.append(str(e)))
    try:
        offline.goto(path.as_uri())
        offline.wait_for_function(f"({TRACE_POINTS})() && ({TRACE_POINTS})()[0][1] === 30", timeout=20000)
        assert offline.evaluate("window.__pwned") is None
        assert offline.text_content(".runcast-chart .xtitle") == "step"  # the English catalog's word, carried inline
        offline.screenshot(path=str(_shots(tmp_path) / "report-export.png"), full_page=True)
    finally:
        context.close()
    assert asked == [] and errors == []
    assert page.errors == [] and page.dialogs == []


def test_a_signed_in_reader_comments_on_a_report_and_script_runs_nowhere(
        live_server: LiveServer, browser: Any, tmp_path: Path) -> None:
    from .test_comments import PASSWORD, Person
    from .test_oidc import _runcast

    run = live_server.sdk_run(name="reported")
    run.log({"loss": 1.0}, step=0)
    _wait_points(live_server, run.id, 1)
    team = {"Authorization": f"Bearer {live_server.token()}"}
    api = f"{live_server.url}/api/v1/runs/{run.id}/reports"
    httpx.post(api, json={"title": "Week one", "body": "Short.", "from_step": 0, "to_step": 0}, headers=team, timeout=30)
    httpx.post(f"{api}/1/publish", json={}, headers=team, timeout=30)
    _runcast(live_server, "user", "create", "alice", "--display-name", "Alice", "--password-stdin",
             stdin=PASSWORD + "\n")
    alice = Person(browser, live_server, "alice")
    try:
        alice.page.goto(f"{live_server.url}/runs/{run.id}/reports/1")
        alice.page.wait_for_selector("#report-comment-form:not([hidden])")
        alice.page.fill("#report-comment-body", "Why **stop** here? <img src=x onerror=alert(1)>")
        alice.page.click("#report-comment-form button[type=submit]")
        alice.page.wait_for_selector("#report-comments li.comment strong")
        assert alice.page.text_content("#report-comments li.comment strong") == "stop"
        alice.page.screenshot(path=str(_shots(tmp_path) / "report-comments.png"), full_page=True)
        assert alice.dialogs == [] and alice.errors == []
    finally:
        alice.context.close()
    listed = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}/comments", timeout=30).json()["comments"]
    assert [(c["anchor"]["kind"], c["anchor"]["id"]) for c in listed] == [("report", 1)]
