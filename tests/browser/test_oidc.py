"""People sign in from Chromium: through a real OpenID Connect provider started by the test
(oidc-provider-mock: discovery, authorization code with PKCE, signed ID tokens) and with a local
account made by the CLI. Once the owner grants roles (`runcast project grant`), a member reads the
project's private run and renames it from the page; a viewer reads it and cannot."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import services
from oidc_provider_mock import User, run_server_in_thread

from .test_signin import _log, _shots

LISTED = "() => /runs yet|\\d+ runs?$/.test(document.getElementById('status').textContent)"
RENAME = """async ([run, name]) => {
  const res = await fetch(`/api/v1/runs/${run}`, {method: "PATCH", headers: {"Content-Type": "application/json"},
                                                  body: JSON.stringify({name})});
  return [res.status, await res.text()];
}"""


def _runcast(server: Any, *args: str, stdin: str | None = None) -> str:
    res = subprocess.run([str(services.BIN / "runcast"), *args], env=services.child_env(server.env), input=stdin,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _sign_in_with_provider(page: Any, server: Any, sub: str, next_path: str = "/") -> None:
    page.goto(server.url + next_path)
    page.wait_for_selector("#signin summary")
    page.click("#signin summary")
    page.click("a.signin-provider[data-provider=mock]")
    page.wait_for_selector("input[name=sub]")  # the provider's own page
    page.fill("input[name=sub]", sub)
    with page.expect_navigation(url=f"{server.url}{next_path}"):
        page.click("button:has-text('Authorize')")
    page.wait_for_selector("#signin-state")


def test_sign_in_through_a_provider_and_act_with_the_role(live_server: Any, page: Any, tmp_path: Path) -> None:
    shots = _shots(tmp_path)
    alice = User(sub="alice-sub", claims={"name": "Alice Liddell", "preferred_username": "alice",
                                          "email": "alice@example.org"})
    bob = User(sub="bob-sub", claims={"name": "Bob Viewer", "preferred_username": "bob"})
    with run_server_in_thread(user_claims=[alice, bob]) as provider:
        issuer = f"http://localhost:{provider.server_port}"
        live_server.env["RUNCAST_OIDC_PROVIDERS"] = json.dumps([{
            "name": "mock", "display_name": "Test IdP", "issuer": issuer, "client_id": "runcast",
            "client_secret": "not-a-secret"}])
        live_server.restart()
        run = live_server.sdk_run(project="team", name="secret-run", visibility="private")
        _log(run, range(1, 11))

        _sign_in_with_provider(page, live_server, "alice-sub")
        assert page.text_content("#signin-state") == "Signed in as Alice Liddell"
        page.wait_for_function(LISTED)
        assert page.locator(f'tr[data-id="{run.id}"]').count() == 0  # no role yet: the private run is hidden
        assert "alice" in _runcast(live_server, "user", "list")
        _runcast(live_server, "project", "grant", "team", "alice", "--role", "member")
        page.goto(f"{live_server.url}/runs/{run.id}")
        page.wait_for_function("window.__runcastDrawn !== undefined", timeout=20000)
        page.screenshot(path=str(shots / "oidc-member-run.png"))
        status, body = page.evaluate(RENAME, [run.id, "renamed by alice"])
        assert status == 200, body
        assert json.loads(body)["name"] == "renamed by alice"

        # Bob signs in (his account is made at his first sign-in), is granted viewer: reads, cannot manage.
        context = page.context.browser.new_context()
        other = context.new_page()
        try:
            _sign_in_with_provider(other, live_server, "bob-sub")
            _runcast(live_server, "project", "grant", "team", "bob", "--role", "viewer")
            api = other.evaluate("async (r) => (await fetch(`/api/v1/runs/${r}`)).status", run.id)
            assert api == 200
            status, body = other.evaluate(RENAME, [run.id, "renamed by bob"])
            assert status == 403 and "viewer" in body
        finally:
            context.close()
        assert httpx_name(live_server, run.id) == "renamed by alice"


def httpx_name(server: Any, run_id: str) -> str:
    import httpx

    token = server.token("team")
    return httpx.get(f"{server.url}/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}, timeout=30).json()["name"]


def test_a_local_account_signs_in_from_the_form(live_server: Any, page: Any, tmp_path: Path) -> None:
    _runcast(live_server, "user", "create", "carol", "--display-name", "Carol", "--password-stdin",
             stdin="a long passphrase\n")
    _runcast(live_server, "project", "grant", "team", "carol", "--role", "viewer")
    run = live_server.sdk_run(project="team", name="private-one", visibility="private")
    _log(run, range(1, 6))
    page.goto(live_server.url + "/")
    page.click("#signin summary")
    assert page.locator("a.signin-provider").count() == 0  # no provider configured: the form only
    page.fill("#signin-name-input", "carol")
    page.fill("#signin-password", "wrong password")
    page.click("#signin-password-form button[type=submit]")
    page.wait_for_function("document.getElementById('signin-password-error').textContent !== ''")
    assert page.text_content("#signin-password-error") == "Wrong name or password."
    page.fill("#signin-password", "a long passphrase")
    with page.expect_navigation():
        page.click("#signin-password-form button[type=submit]")
    page.wait_for_selector("#signin-state")
    assert page.text_content("#signin-state") == "Signed in as Carol"
    page.screenshot(path=str(_shots(tmp_path) / "local-account-header.png"),
                    clip={"x": 0, "y": 0, "width": 1280, "height": 160})
    page.goto(f"{live_server.url}/runs/{run.id}")
    page.wait_for_function("window.__runcastDrawn !== undefined", timeout=20000)
    stored = page.evaluate("() => JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage)])")
    assert "passphrase" not in stored
