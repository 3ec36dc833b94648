"""Team sign-in from the browser: a private run is a "sign in" page to a stranger; the team signs
in through the header's form, sees the run listed, watches it live while the SDK logs (what is
drawn equals what the API stores), signs out and the run is gone again."""

from __future__ import annotations

import math
import os
from pathlib import Path

import httpx

from .conftest import main_xs
from .truth import assert_page_tells_the_truth
from browser.reads import key_reads

KEYS = ["train/loss"]
LISTED = "() => /runs yet|\\d+ runs?$/.test(document.getElementById('status').textContent)"  # the list loaded


def _log(run, steps) -> None:  # type: ignore[no-untyped-def]
    for s in steps:
        run.log({"train/loss": 2.0 * math.exp(-s / 50) + 0.1 * math.cos(s)}, step=s)
    assert run.flush(timeout=20)


def _shots(tmp_path: Path) -> Path:
    """Where the pictures go: $SIGNIN_SHOTS when set (to look at them), else the test's temp dir."""
    out = Path(os.environ.get("SIGNIN_SHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_sign_in_watch_a_private_run_live_and_sign_out(live_server, page, tmp_path):
    token = live_server.token("team")
    run = live_server.sdk_run(project="team", name="secret-run", visibility="private")
    _log(run, range(1, 31))
    shots = _shots(tmp_path)

    # A stranger: the run page offers the sign-in (a private run and an unknown id look alike).
    page.goto(f"{live_server.url}/runs/{run.id}")
    page.wait_for_selector("#not-found:not([hidden])", timeout=20000)
    assert page.text_content("#not-found-title") == "Private run? Sign in to see it"
    assert page.is_visible("#private-hint")
    page.screenshot(path=str(shots / "private-run-signed-out.png"))
    asked: list[str] = []  # GET /session: only a browser that signed in asks it
    page.on("request", lambda r: r.method == "GET" and r.url.endswith("/api/v1/session") and asked.append(r.url))
    console: list[str] = []
    page.on("console", lambda m: m.type == "error" and console.append(m.text))
    page.goto(live_server.url + "/")
    page.wait_for_selector("#signin summary")
    page.wait_for_function(LISTED)
    assert page.locator(f'tr[data-id="{run.id}"]').count() == 0
    assert asked == [] and console == []  # an anonymous page: no request that fails, no console error

    # Sign in through the header's form: a wrong token first.
    page.click("#signin summary")
    page.fill("#signin-token", "rc_wrong")
    page.click("#signin-form button[type=submit]")
    page.wait_for_function("document.getElementById('signin-error').textContent !== ''")
    assert "not valid" in page.text_content("#signin-error")
    page.fill("#signin-token", token)
    with page.expect_navigation():
        page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#signin-state")
    assert page.text_content("#signin-state") == "Signed in to team"
    page.wait_for_selector(f'tr[data-id="{run.id}"]', timeout=20000)
    assert "private" in page.text_content(f'tr[data-id="{run.id}"]')
    page.screenshot(path=str(shots / "signed-in-header.png"), clip={"x": 0, "y": 0, "width": 1280, "height": 160})
    # The token is nowhere the page can keep it.
    stored = page.evaluate("() => JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage), document.cookie])")
    assert token not in stored and "runcast_session" not in stored  # the cookie is HttpOnly

    # The private run, live: drawn as stored, and the SDK's new points arrive by the stream.
    page.goto(f"{live_server.url}/runs/{run.id}")
    page.wait_for_function("window.__runcastDrawn !== undefined", timeout=20000)
    assert main_xs(page) == list(range(1, 31))
    page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
    metrics_calls: list[str] = []
    page.on("request", lambda r: metrics_calls.extend(key_reads(r.url, "train/loss")))
    _log(run, range(31, 81))
    page.wait_for_function("window.__runcast.pointCount() >= 80", timeout=10000)
    assert main_xs(page) == list(range(1, 81))
    assert metrics_calls == []  # by the stream, not by reading again
    auth = {"Authorization": f"Bearer {token}"}
    assert assert_page_tells_the_truth(page, live_server.url, run.id, KEYS, "signed in", headers=auth) >= 80
    page.screenshot(path=str(shots / "private-run-signed-in.png"))

    # Sign out: the session is gone and so is the run.
    with page.expect_navigation():
        page.click("#signout")
    page.wait_for_selector("#not-found:not([hidden])", timeout=20000)
    assert page.text_content("#not-found-title") == "Private run? Sign in to see it"
    assert page.is_visible("#signin summary")
    cookies = page.context.cookies()
    assert not [c for c in cookies if c["name"] in ("runcast_session", "runcast_signed_in")]
    page.goto(live_server.url + "/")
    page.wait_for_selector("#signin summary")
    page.wait_for_function(LISTED)
    assert page.locator(f'tr[data-id="{run.id}"]').count() == 0
    assert httpx.get(f"{live_server.url}/api/v1/runs/{run.id}", timeout=30).status_code == 404
    assert page.errors == [] and page.dialogs == []


def test_the_sign_in_control_fits_a_phone(live_server, browser, tmp_path):
    token = live_server.token("team")
    context = browser.new_context(viewport={"width": 390, "height": 800}, color_scheme="dark")
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(live_server.url + "/")
        page.click("#signin summary")
        box = page.locator("#signin-form").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
        page.screenshot(path=str(_shots(tmp_path) / "phone-sign-in-form.png"), clip={"x": 0, "y": 0, "width": 390, "height": 260})
        page.fill("#signin-token", token)
        with page.expect_navigation():
            page.press("#signin-token", "Enter")
        page.wait_for_selector("#signin-state")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        page.screenshot(path=str(_shots(tmp_path) / "phone-signed-in.png"), clip={"x": 0, "y": 0, "width": 390, "height": 160})
        assert errors == []
    finally:
        context.close()


def test_a_page_that_finds_its_session_ended_stops_asking(live_server, page):
    """The readable marker outlived the session (revoked, expired, another browser's cookie jar):
    one GET /session answers 401, the page drops the marker, and the next page asks nothing."""
    page.context.add_cookies([{"name": "runcast_signed_in", "value": "1", "url": live_server.url}])
    asked: list[int] = []
    page.on("response", lambda r: r.request.method == "GET" and r.url.endswith("/api/v1/session")
            and asked.append(r.status))
    page.goto(live_server.url + "/")
    page.wait_for_function(LISTED)
    page.wait_for_selector("#signin summary")
    assert asked == [401]
    assert not [c for c in page.context.cookies() if c["name"] == "runcast_signed_in"]
    page.reload()
    page.wait_for_function(LISTED)
    assert asked == [401]
