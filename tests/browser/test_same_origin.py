"""Nothing leaves the server: every request of every page goes to its own origin, offline.

Each test records every request the page makes (``page.on("request")``) and aborts any to
another origin, as a machine without internet would, then checks the list: the runs
list, a run with data (loss, panels, data mix, checkpoint, note), compare, ``/docs``
and ``/redoc``. The dashboard is loaded with the Plotly.js partial bundle (when
``scripts/install`` put it in the checkout) and with the plotly package's full bundle
(the fallback), and every chart's trace types must be ones the loaded bundle knows; and
with the pages' module bundles (``frontend/dist``, when built) and without them.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import pytest
from runcast_server.core.settings import Settings
from runcast_server.web.vendor import PLOTLY_NPM_FILE, PLOTLY_NPM_PACKAGE, plotly_package_bundle

from browser.conftest import open_run

INSTALLED_PARTIAL = Settings().vendor_dir / PLOTLY_NPM_PACKAGE / PLOTLY_NPM_FILE
PAGE_BUNDLES = Path(__file__).resolve().parents[2] / "frontend" / "dist" / "manifest.json"

UNKNOWN_TRACE_TYPES = """() => {
  const known = new Set(Object.keys(Plotly.PlotSchema.get().traces));
  return [...document.querySelectorAll('.js-plotly-plot')]
    .flatMap(gd => (gd.data || []).map(t => t.type || 'scatter')).filter(t => !known.has(t));
}"""


def record_requests(page: Any, origin: str) -> list[str]:
    """Every URL the page asks for from now on; requests to another origin are aborted."""
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    page.context.route(lambda url: not url.startswith(origin + "/"), lambda route: route.abort())
    return urls


def foreign(urls: list[str], origin: str) -> list[str]:
    return [u for u in urls if not u.startswith(origin + "/") and not u.startswith(("data:", "blob:"))]


def settle(page: Any) -> None:
    """Scroll to the bottom (panels load when seen) and let late requests go out."""
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    page.wait_for_timeout(1500)


def seed_runs(server: Any, tmp_path: Path) -> tuple[Any, Any]:
    run = server.sdk_run(name="origin", config={"lr": 3e-4, "batch": 32})
    run.data_mix({"web": 0.7, "code": 0.3}, step=1)
    for s in range(1, 201):
        run.log({"train/loss": 3 * math.exp(-s / 50) + 1, "lr": 3e-4, "grad_norm": 1 + (s % 7) / 10}, step=s)
    run.data_mix({"web": 0.5, "code": 0.5}, step=120)
    ckpt = tmp_path / "ckpt_100.pt"
    ckpt.write_bytes(b"weights" * 200)
    run.checkpoint(ckpt, step=100, metrics={"val/loss": 1.5})
    run.note("lr held", step=150)
    other = server.sdk_run(name="other")
    for s in range(1, 101):
        other.log({"train/loss": 3 * math.exp(-s / 30) + 1}, step=s)
    assert run.flush(timeout=30) and other.flush(timeout=30)
    return run, other


@pytest.mark.parametrize("bundle", ["partial", "full", "plain modules"])
def test_dashboard_pages_ask_only_their_own_origin(live_server, page, tmp_path, bundle):
    """``plain modules``: the pages' own modules one by one (no frontend/dist, as a pip-only install)."""
    if bundle in ("partial", "plain modules"):
        if not INSTALLED_PARTIAL.is_file():
            pytest.skip(f"{PLOTLY_NPM_PACKAGE} is not installed (scripts/install with npm present installs it)")
        expected = INSTALLED_PARTIAL
        if bundle == "plain modules":
            live_server.env["RUNCAST_PAGE_BUNDLES"] = "false"
            live_server.restart()
    else:
        live_server.env["RUNCAST_VENDOR_DIR"] = str(tmp_path / "no-node-modules")
        live_server.restart()
        expected = plotly_package_bundle()
    run, other = seed_runs(live_server, tmp_path)
    origin = live_server.url
    urls = record_requests(page, origin)

    page.goto(origin + "/")
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 2", timeout=20000)
    settle(page)

    open_run(page, live_server, run.id)
    page.wait_for_selector("#timeline li.tl-checkpoint", timeout=20000)
    page.wait_for_function(
        "() => { const gd = document.getElementById('chart-mix'); return gd.data && gd.data.length === 2; }",
        timeout=20000,
    )
    settle(page)
    # Panels chart when seen: look at them (the page may have grown under the scroll above while it loaded).
    page.wait_for_function(
        """() => { document.getElementById('panels').scrollIntoView();
             return document.querySelectorAll('#panels .js-plotly-plot').length >= 2; }""",
        timeout=20000,
    )
    assert page.evaluate(UNKNOWN_TRACE_TYPES) == []

    page.goto(f"{origin}/compare?runs={run.id},{other.id}&key=train/loss")
    page.wait_for_function(
        """() => { const gd = document.querySelector('#charts .js-plotly-plot');
             return gd && gd.data && gd.data.filter(t => t.meta && t.meta.role === 'smooth').length === 2; }""",
        timeout=20000,
    )
    assert page.evaluate(UNKNOWN_TRACE_TYPES) == []
    settle(page)

    assert foreign(urls, origin) == []
    plotly_urls = {u for u in urls if u.endswith("/plotly.min.js")}
    digest = hashlib.sha256(expected.read_bytes()).hexdigest()[:16]
    assert plotly_urls == {f"{origin}/vendor/{digest}/plotly.min.js"}
    assert any(u.startswith(f"{origin}/api/v1/runs/{run.id}/stream") for u in urls)  # it did go live
    scripts = {u.split("?")[0].removeprefix(origin) for u in urls if "/js/" in u or "/dist/" in u}
    if bundle == "plain modules" or not PAGE_BUNDLES.is_file():
        assert {"/js/runs.js", "/js/run.js", "/js/chart.js", "/js/compare.js"} <= scripts and not any("/dist/" in u for u in scripts)
    else:
        assert scripts == {"/dist/runs.js", "/dist/run.js", "/dist/compare.js"}
    assert page.dialogs == [] and page.errors == []


def test_api_docs_render_offline(live_server, page):
    origin = live_server.url
    urls = record_requests(page, origin)

    page.goto(origin + "/docs")
    page.wait_for_selector(".opblock-summary-path", timeout=30000)
    paths = page.eval_on_selector_all(".opblock-summary-path", "els => els.map(e => e.getAttribute('data-path'))")
    for path in ("/api/v1/ingest", "/api/v1/runs", "/api/v1/runs/{run_id}/metrics", "/healthz"):
        assert path in paths
    assert page.query_selector(".errors-wrapper") is None  # the spec loaded and parsed

    page.goto(origin + "/redoc")
    page.wait_for_selector("h1", timeout=30000)
    assert page.text_content("h1").startswith("Runcast")
    page.wait_for_selector("[role=menuitem]", timeout=30000)
    menu = " ".join(page.eval_on_selector_all("[role=menuitem]", "els => els.map(e => e.textContent)"))
    assert "Metrics" in menu
    page.wait_for_timeout(1000)

    assert foreign(urls, origin) == []
    assert f"{origin}/openapi.json" in urls
    assert page.dialogs == [] and page.errors == []
