"""The embed page inside an iframe of another site (a page served from another port: another
origin), fed live by a real SDK run: it draws what the API stores, as the run page does, and
the operator's frame policy decides who may frame it."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import services

from browser.truth import assert_page_tells_the_truth


class HostSite:
    """A blog on another origin: one HTML page that frames ``src``."""

    def __init__(self) -> None:
        self.src = ""
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = (f'<!doctype html><title>A blog</title><h1>Our training run</h1>'
                        f'<iframe id="chart" src="{site.src}" width="720" height="360" '
                        f'style="border:1px solid #ccc"></iframe>').encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", services.free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def host_site() -> Iterator[HostSite]:
    site = HostSite()
    try:
        yield site
    finally:
        site.close()


def loss(step: int) -> float:
    return 3.0 * math.exp(-step / 40) + 0.5 + 0.02 * math.sin(step)


def embed_frame(page: Any, host_site: HostSite) -> Any:
    page.goto(host_site.url)
    page.wait_for_function("document.getElementById('chart').contentWindow !== null")
    for _ in range(100):
        frames = [f for f in page.frames if "/embed/runs/" in f.url]
        if frames:
            return frames[0]
        page.wait_for_timeout(100)
    raise AssertionError(f"no embed frame among {[f.url for f in page.frames]}")


def test_embed_in_another_sites_iframe_follows_a_live_run(live_server, page, host_site, tmp_path):
    run = live_server.sdk_run(name="public <run> \"quoted\"")
    for s in range(1, 41):
        run.log({"loss": loss(s), "lr": 1e-3}, step=s)
    assert run.flush(timeout=20)
    host_site.src = f"{live_server.url}/embed/runs/{run.id}?key=loss"
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    frame = embed_frame(page, host_site)
    assert frame.url.startswith(live_server.url)  # another origin than the page that frames it
    frame.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=20000)
    frame.wait_for_function("window.__runcast.pointCount() >= 40", timeout=20000)
    metrics_calls: list[str] = []
    page.on("request", lambda r: "/metrics?" in r.url and metrics_calls.append(r.url))

    for s in range(41, 121):
        run.log({"loss": loss(s), "lr": 1e-3}, step=s)
    assert run.flush(timeout=20)
    frame.wait_for_function("window.__runcast.pointCount() >= 120", timeout=20000)
    assert metrics_calls == []  # by the live stream, not by reading again
    compared = assert_page_tells_the_truth(frame, live_server.url, run.id, ["loss"], "embed")
    assert compared == 120
    # Only the chart: the title (as text) links to the full run page; no panels, timeline or controls.
    title = frame.locator("#embed-title")
    assert title.text_content() == 'public <run> "quoted" · loss'
    assert title.get_attribute("href") == f"{live_server.url}/runs/{run.id}?keys=loss"
    assert title.get_attribute("target") == "_blank"
    assert frame.locator(".js-plotly-plot").count() == 1
    assert frame.locator("#timeline, #panels, #controls, #config").count() == 0
    assert frame.text_content("#live-state") == "● live"
    out = tmp_path / "embed.png"
    page.screenshot(path=str(out))
    # The blog's own scripts may read the public API (CORS), and may not write: the browser
    # refuses the ingest request after its preflight (no Access-Control-Allow-Origin).
    read = page.evaluate("""async (u) => { const r = await fetch(u); return [r.status, (await r.json()).key]; }""",
                         f"{live_server.url}/api/v1/runs/{run.id}/metrics?key=loss")
    assert read == [200, "loss"]
    write = page.evaluate("""async (u) => { try { await fetch(u, {method: 'POST', body: '{}',
        headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer x'}}); return 'sent'; }
        catch (e) { return e.name; } }""", f"{live_server.url}/api/v1/ingest")
    assert write == "TypeError"
    # The embed asks its own server for everything (no CDN), the host page only for itself.
    assert [u for u in urls if not u.startswith((live_server.url + "/", host_site.url))] == []
    assert page.errors == [] and page.dialogs == []


def test_a_frame_policy_that_names_other_sites_keeps_the_embed_out(live_server, page, host_site):
    live_server.env["RUNCAST_EMBED_FRAME_ANCESTORS"] = "https://blog.example.org"
    live_server.restart()
    run = live_server.sdk_run(name="framed")
    run.log({"loss": 1.0}, step=1)
    assert run.flush(timeout=20)
    host_site.src = f"{live_server.url}/embed/runs/{run.id}?key=loss"
    page.goto(host_site.url)
    page.wait_for_timeout(1500)
    frames = [f for f in page.frames if f != page.main_frame]
    assert frames, "the iframe element makes a frame"
    # Chromium shows its own error page in place of the refused document: no script of ours runs.
    assert all(f.evaluate("typeof window.__runcast") == "undefined" for f in frames if not f.is_detached())
