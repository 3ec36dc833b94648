"""The team writes a report in the browser (docs/reports.md#the-editor): Olga, an owner, asks for
a new report on the run page's Reports card (its step range prefilled from the run), lands in the
report page's editor with a draft generated from the record, adds a live chart and hostile
Markdown, sees the server's preview draw the chart and neutralise the rest, saves a version and
publishes; an anonymous reader's open run page lists the report without a reload, and the
published page draws the chart with the same markup inert. Vera, a viewer, sees no editor and her
forged writes are refused. Screenshots of the editor in English and in Chinese."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from .comment_seed import PASSWORD, signed_in
from .conftest import LiveServer
from .test_oidc import _runcast
from .test_reports import _wait_points

HOSTILE = """Olga's notes on the period.

```runcast-chart keys=train/loss from=0 to=29
```

<script>window.__pwned = 1</script>

[click me](javascript:window.__pwned=2)

<svg onload="window.__pwned=3"><circle r="4"/></svg>

![remote](http://evil.example/pixel.png)
"""
CHART_POINTS = """(root) => {
  const gd = document.querySelector(root + ' .runcast-block[data-block="chart"] .runcast-chart');
  return gd && gd.data && gd.data.length ? gd.data[0].x.length : 0;
}"""
# Nothing of the hostile body survives as markup under `root` (outside the live blocks, which Plotly
# draws in SVG): no script, SVG, image, handler or javascript: link; the words are still there as text.
INERT = """(root) => {
  const host = document.querySelector(root);
  const prose = [...host.querySelectorAll('*')].filter(n => !n.closest('.runcast-block'));
  const active = prose.filter(n => n.matches('script, svg, img, iframe, object, a[href^="javascript"]'));
  const handlers = prose.filter(n => [...n.attributes].some(a => a.name.startsWith('on')));
  return {active: active.map(n => n.outerHTML), handlers: handlers.map(n => n.outerHTML),
          pwned: window.__pwned === undefined ? null : window.__pwned, text: host.textContent.includes('click me')};
}"""
CLEAN = {"active": [], "handlers": [], "pwned": None, "text": True}


def _shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("REPORT_SHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


class Seat:
    """A browser context signed in as ``name`` (the session cookie the sign-in form sets), in ``locale``."""

    def __init__(self, browser: Any, server: LiveServer, name: str | None, locale: str = "en-US") -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale=locale)
        if name is not None:
            client = signed_in(server.url, name)
            self.context.add_cookies([{"name": c.name, "value": c.value or "", "url": server.url}
                                      for c in client.cookies.jar])
            client.close()
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.errors.append("dialog: " + d.message), d.dismiss()))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = server.url

    def open_run(self, run_id: str) -> None:
        self.page.goto(f"{self.url}/runs/{run_id}")
        self.page.wait_for_function("window.__runcast && window.__runcast.stream && window.__runcast.stream.open",
                                    timeout=20000)
        self.page.wait_for_selector("#reports li")

    def forged(self, method: str, path: str, body: dict[str, Any]) -> int:
        """A write sent from this page's own script (same-origin, with its session cookie): its status."""
        return int(self.page.evaluate("""async ([method, path, body]) => (await fetch(path, {method,
            headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)})).status""", [method, path, body]))


def _people(server: LiveServer) -> None:
    for name, display, role in (("olga", "Olga", "owner"), ("vera", "Vera", "viewer")):
        _runcast(server, "user", "create", name, "--display-name", display, "--password-stdin", stdin=PASSWORD + "\n")
        _runcast(server, "project", "grant", "demo", name, "--role", role)


def test_an_owner_drafts_edits_previews_and_publishes_and_a_reader_sees_it_live(
        live_server: LiveServer, browser: Any, tmp_path: Path) -> None:
    run = live_server.sdk_run(name="edited")
    for step in range(30):
        run.log({"train/loss": 3.0 - step * 0.05}, step=step)
    _wait_points(live_server, run.id, 30)
    _people(live_server)
    reader, olga = Seat(browser, live_server, None), Seat(browser, live_server, "olga")
    try:
        reader.open_run(run.id)
        reader.page.wait_for_selector("#reports li.empty:text-is('No report published yet.')")
        assert not reader.page.is_visible("#report-new")  # no "New report" for the public

        olga.open_run(run.id)
        olga.page.wait_for_selector("#report-new:not([hidden])")
        olga.page.click("#report-new summary")
        assert (olga.page.input_value("#report-new-from"), olga.page.input_value("#report-new-to")) == ("0", "29")
        olga.page.fill("#report-new-title", "The first thirty steps")
        olga.page.locator("#reports-card").screenshot(path=str(_shots(tmp_path) / "report-new-en.png"))
        with olga.page.expect_navigation(url=f"**/runs/{run.id}/reports/1#edit"):
            olga.page.click("#report-new-form button[type=submit]")
        olga.page.wait_for_selector("#report-editor:not([hidden])")
        draft = olga.page.input_value("#report-editor-body")
        assert "`train/loss`: 3 at step 0 -> 1.55 at step 29" in draft  # generated from the record
        assert olga.page.input_value("#report-editor-title") == "The first thirty steps"

        olga.page.fill("#report-editor-body", HOSTILE)
        olga.page.wait_for_function("document.getElementById('report-editor-preview').textContent.includes('Olga')"
                                    f" && ({CHART_POINTS})('#report-editor-preview') === 30", timeout=20000)
        assert olga.page.evaluate(INERT, "#report-editor-preview") == CLEAN
        # The preview is the public's view of the published report (docs/reports.md), and says so.
        assert olga.page.text_content(".report-editor-preview-pane h3") == "Preview, as the public will see it"
        assert olga.page.text_content("#report-editor-preview").count("window.__pwned") >= 1  # shown as text
        olga.page.screenshot(path=str(_shots(tmp_path) / "report-editor-en.png"), full_page=True)

        olga.page.click("#report-editor-form button[type=submit]")
        olga.page.wait_for_function("document.getElementById('report-editor-saved').textContent"
                                    " === 'Saved as version 2.'")
        olga.page.wait_for_function("document.querySelectorAll('#report-versions li').length === 2")
        assert reader.page.text_content("#reports li") == "No report published yet."  # a draft is the team's

        olga.page.click("#report-publish")
        olga.page.wait_for_selector("#report-publish", state="hidden")
        olga.page.wait_for_selector("#report-unpublish:not([hidden])")
        assert olga.page.text_content("#report-versions li[data-version='2'] .badge") == "published"

        # The reader's open run page lists it without a reload (`event: reports`), and opens it.
        reader.page.wait_for_selector("#reports a", timeout=20000)
        assert reader.page.text_content("#reports a") == "The first thirty steps"
        reader.page.click("#reports a")
        reader.page.wait_for_url(f"**/runs/{run.id}/reports/1")
        reader.page.wait_for_function(f"({CHART_POINTS})('#report-body') === 30", timeout=20000)
        assert reader.page.evaluate(INERT, "#report-body") == CLEAN
        for hidden in ("#report-team", "#report-editor", "#report-versions-card"):
            assert not reader.page.is_visible(hidden), hidden
        assert reader.forged("POST", f"/api/v1/runs/{run.id}/reports/1/unpublish", {}) == 401
        assert not any("evil.example" in u for u in reader.requests + olga.requests)
        assert reader.errors == [] and olga.errors == []
    finally:
        reader.context.close()
        olga.context.close()
    assert httpx.get(f"{live_server.url}/api/v1/runs/{run.id}/reports/1", timeout=30).json()["version"] == 2


def test_a_viewer_sees_no_editor_and_the_editor_speaks_chinese(
        live_server: LiveServer, browser: Any, tmp_path: Path) -> None:
    run = live_server.sdk_run(name="viewed")
    for step in range(10):
        run.log({"train/loss": 2.0 - step * 0.1}, step=step)
    _wait_points(live_server, run.id, 10)
    _people(live_server)
    team = {"Authorization": f"Bearer {live_server.token()}"}
    api = f"{live_server.url}/api/v1/runs/{run.id}/reports"
    body = "Ten steps.\n\n```runcast-chart keys=train/loss\n```\n"
    assert httpx.post(api, json={"title": "Ten", "body": body, "from_step": 0, "to_step": 9},
                      headers=team, timeout=30).status_code == 201
    assert httpx.post(f"{api}/1/publish", json={}, headers=team, timeout=30).status_code == 200

    vera = Seat(browser, live_server, "vera")
    try:
        vera.open_run(run.id)
        vera.page.wait_for_selector("#reports a")
        assert not vera.page.is_visible("#report-new")
        vera.page.goto(f"{live_server.url}/runs/{run.id}/reports/1#edit")
        vera.page.wait_for_function(f"({CHART_POINTS})('#report-body') === 10", timeout=20000)
        for hidden in ("#report-team", "#report-edit", "#report-editor", "#report-versions-card"):
            assert not vera.page.is_visible(hidden), hidden
        # Her page's own script, with her session: every write refused, nothing written.
        path = f"/api/v1/runs/{run.id}"
        assert vera.forged("PUT", f"{path}/reports/1", {"title": "x", "body": "y", "from_step": 0, "to_step": 1}) == 403
        assert vera.forged("POST", f"{path}/reports/1/unpublish", {}) == 403
        assert vera.forged("POST", f"{path}/report-preview", {"body": "y"}) == 403
        assert vera.forged("POST", f"{path}/reports", {"title": "x", "body": "y", "from_step": 0, "to_step": 1}) == 403
        assert vera.errors == []
    finally:
        vera.context.close()
    assert [v["version"] for v in httpx.get(f"{api}/1/versions", headers=team, timeout=30).json()["versions"]] == [1]
    assert httpx.get(api, headers=team, timeout=30).json()["reports"][0]["state"] == "published"

    olga = Seat(browser, live_server, "olga", locale="zh-CN")
    try:
        olga.page.goto(f"{live_server.url}/runs/{run.id}/reports/1#edit")
        olga.page.wait_for_function(f"({CHART_POINTS})('#report-editor-preview') === 10", timeout=20000)
        assert olga.page.text_content("#report-edit") == "编辑"
        assert olga.page.text_content("#report-editor-form button[type=submit]") == "保存为新版本"
        assert olga.page.text_content("#report-versions li[data-version='1'] .badge") == "已发布"
        olga.page.screenshot(path=str(_shots(tmp_path) / "report-editor-zh-CN.png"), full_page=True)
        assert olga.errors == []
    finally:
        olga.context.close()
