"""Comments on the run page, from the seats of three people signed in with local accounts in
three browser contexts on a live run (and of a person signed in through a real OpenID Connect
provider, with an anonymous reader): Alice comments on a point she clicks on the loss chart;
Bob sees it arrive (in the panel and as a marker) without a reload; Mia, a member of the
project, hides it from her page and it vanishes from Alice's and Bob's. A comment whose
Markdown holds script, an event handler, a `javascript:` link and a remote image runs nothing
and loads nothing on any page."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from oidc_provider_mock import User, run_server_in_thread

from .conftest import POINT_AT, LiveServer
from .test_oidc import _runcast, _sign_in_with_provider
from .test_signin import _log, _shots

PASSWORD = "a long passphrase"
COMMENT_MARKERS = """() => {
  const gd = document.getElementById('chart-main');
  return (gd.data || []).filter(t => t.meta && t.meta.role === 'markers')
    .flatMap(t => Array.from(t.customdata || []).map((id, i) => [id, t.x[i]])).filter(([id]) => id !== null);
}"""


class Person:
    """One browser context signed in with a local account; its dialogs, errors and requests logged."""

    def __init__(self, browser: Any, server: LiveServer, name: str | None,
                 sign_in: Callable[[Any, LiveServer], None] | None = None) -> None:
        """``name``'s local account; ``sign_in`` another way in (a provider); neither: anonymous."""
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.server = server
        if sign_in is not None:
            sign_in(self.page, server)
            return
        self.page.goto(server.url + "/")
        if name is None:
            return
        self.page.click("#signin summary")
        self.page.fill("#signin-name-input", name)
        self.page.fill("#signin-password", PASSWORD)
        with self.page.expect_navigation():
            self.page.click("#signin-password-form button[type=submit]")
        self.page.wait_for_selector("#signin-state")

    def open_run(self, run_id: str) -> None:
        self.page.goto(f"{self.server.url}/runs/{run_id}")
        self.page.wait_for_function("window.__runcastDrawn !== undefined", timeout=20000)
        self.page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=20000)
        self.page.wait_for_selector("#comments .comment-threads")

    def comment_on_point(self, key: str, step: int, text: str) -> int:
        x, y = self.page.evaluate(POINT_AT, [key, step])
        self.page.mouse.move(x, y)
        self.page.mouse.click(x, y)
        self.page.wait_for_selector("#comment-new")
        assert self.page.text_content("#comment-new .comment-anchor") == f"Comment on step {step} of {key}"
        self.page.fill("#comment-new-body", text)
        with self.page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/comments")) as posted:
            self.page.click("#comment-new button[type=submit]")
        assert posted.value.status == 201, posted.value.text()
        return int(posted.value.json()["id"])

    def shows(self, comment_id: int) -> None:
        self.page.wait_for_selector(f"#comment-{comment_id}", timeout=10000)

    def markers(self) -> list[list[Any]]:
        return list(self.page.evaluate(COMMENT_MARKERS))

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def people(live_server: LiveServer, browser: Any) -> Iterator[dict[str, Person]]:
    for name, display in (("alice", "Alice"), ("bob", "Bob"), ("mia", "Mia")):
        _runcast(live_server, "user", "create", name, "--display-name", display, "--password-stdin", stdin=PASSWORD + "\n")
    _runcast(live_server, "project", "grant", "demo", "mia", "--role", "member")
    out = {name: Person(browser, live_server, name) for name in ("alice", "bob", "mia")}
    try:
        yield out
    finally:
        for p in out.values():
            p.close()


def test_a_comment_on_a_step_goes_live_to_another_page_and_the_team_hides_it(
        live_server: LiveServer, people: dict[str, Person], tmp_path: Path) -> None:
    run = live_server.sdk_run(name="public-live")
    _log(run, range(1, 41))
    alice, bob, mia = people["alice"], people["bob"], people["mia"]
    for p in (alice, bob, mia):
        p.open_run(run.id)
    assert bob.page.text_content("#comments .empty") == "No comments yet."

    cid = alice.comment_on_point("train/loss", 20, "Why the **bump** here?")
    bob.shows(cid)  # no reload: the stream's `event: comments`
    assert bob.page.text_content(f"#comment-{cid} .comment-anchor").startswith("step 20 of train/loss")
    assert bob.page.inner_html(f"#comment-{cid} .comment-body").strip() == "<p>Why the <strong>bump</strong> here?</p>"
    bob.page.wait_for_function(f"({COMMENT_MARKERS})().some(([id]) => id === {cid})")
    assert bob.markers() == [[cid, 20]]
    # The run goes on while the comment stands: new points do not take it away.
    _log(run, range(41, 61))
    mia.shows(cid)
    mia.page.wait_for_function(f"({COMMENT_MARKERS})().some(([id]) => id === {cid})")
    mia.page.screenshot(path=str(_shots(tmp_path) / "comments-panel-and-marker.png"), full_page=False)

    # A marker opens its thread in the panel (Bob clicks the marker itself).
    bob.page.evaluate(f"""() => {{
      const gd = document.getElementById('chart-main');
      const t = gd.data.find(t => t.meta && t.meta.role === 'markers');
      const i = Array.from(t.customdata).indexOf({cid});
      gd.emit('plotly_click', {{points: [{{data: t, x: t.x[i], customdata: {cid}}}]}});
    }}""")
    bob.page.wait_for_selector(f"#comment-{cid}.target")

    # Bob replies; the team's answer (Mia's) is marked as the team's.
    bob.page.click(f"#comment-{cid} button:has-text('Reply')")
    bob.page.fill(f"#comment-{cid} .comment-reply-body", "Same question.")
    bob.page.click(f"#comment-{cid} .comment-form button[type=submit]")
    alice.page.wait_for_selector(f"#comment-{cid} .comment-reply")
    mia.page.wait_for_selector(f"#comment-{cid} .comment-reply")
    mia.page.click(f"#comment-{cid} button:has-text('Reply')")
    mia.page.fill(f"#comment-{cid} .comment-reply-body", "A data-mix change at step 20.")
    mia.page.click(f"#comment-{cid} .comment-form button[type=submit]")
    alice.page.wait_for_selector(f"#comment-{cid} .comment-team .comment-team-badge")
    assert "Hide" not in (alice.page.text_content(f"#comment-{cid}") or "")  # not the team

    # The team hides the thread: it vanishes from Alice's and Bob's pages, panel and chart.
    mia.page.click(f"#comment-{cid} article[data-comment-id='{cid}'] button:has-text('Hide')")
    for p in (alice, bob):
        p.page.wait_for_selector(f"#comment-{cid}", state="detached", timeout=10000)
        p.page.wait_for_function(f"!({COMMENT_MARKERS})().some(([id]) => id === {cid})")
    mia.page.wait_for_selector(f"#comment-{cid} article[data-state='hidden']")  # the team still sees it
    assert mia.markers() == []
    for p in (alice, bob, mia):
        assert p.dialogs == [] and p.errors == [], (p.dialogs, p.errors)


def test_a_person_signed_in_through_a_provider_comments_live_and_the_team_hides_it(
        live_server: LiveServer, browser: Any) -> None:
    """The issue's path end to end with a real OpenID Connect provider (not a mock of the client):
    Carol signs in through it (her account is made then), comments on a step of a live run; an
    anonymous reader's page shows it without a reload; Mia, of the team, hides it and it vanishes there."""
    carol = User(sub="carol-sub", claims={"name": "Carol Provider", "preferred_username": "carol"})
    with run_server_in_thread(user_claims=[carol]) as provider:
        live_server.env["RUNCAST_OIDC_PROVIDERS"] = json.dumps([{
            "name": "mock", "display_name": "Test IdP", "issuer": f"http://localhost:{provider.server_port}",
            "client_id": "runcast", "client_secret": "not-a-secret"}])
        live_server.restart()
        _runcast(live_server, "user", "create", "mia", "--display-name", "Mia", "--password-stdin", stdin=PASSWORD + "\n")
        _runcast(live_server, "project", "grant", "demo", "mia", "--role", "member")
        run = live_server.sdk_run(name="provider-comments")
        _log(run, range(1, 31))
        people = [Person(browser, live_server, None, sign_in=lambda page, server: _sign_in_with_provider(page, server, "carol-sub")),
                  Person(browser, live_server, None), Person(browser, live_server, "mia")]
        try:
            writer, reader, team = people
            assert writer.page.text_content("#signin-state") == "Signed in as Carol Provider"
            writer.errors.clear()  # the provider's own pages' (its stylesheet from a CDN): not Runcast's
            for p in people:
                p.open_run(run.id)
            cid = writer.comment_on_point("train/loss", 12, "Is this dip the **warm-up** ending?")
            reader.shows(cid)  # live: no reload
            assert "Carol Provider" in (reader.page.text_content(f"#comment-{cid}") or "")
            reader.page.wait_for_function(f"({COMMENT_MARKERS})().some(([id]) => id === {cid})")
            _log(run, range(31, 41))  # the run goes on
            team.shows(cid)
            team.page.click(f"#comment-{cid} article[data-comment-id='{cid}'] button:has-text('Hide')")
            for p in (reader, writer):
                p.page.wait_for_selector(f"#comment-{cid}", state="detached", timeout=10000)
                p.page.wait_for_function(f"!({COMMENT_MARKERS})().some(([id]) => id === {cid})")
            for p in people:
                assert p.dialogs == [] and p.errors == [], (p.dialogs, p.errors)
        finally:
            for p in people:
                p.close()


HOSTILE = """Look <script>alert('script')</script>

<img src=x onerror="alert('onerror')">

[a trap](javascript:alert('link'))

![remote](https://images.example.invalid/pixel.png)

[the paper](https://example.org/paper)"""


def test_hostile_markdown_runs_nothing_and_loads_nothing(live_server: LiveServer, people: dict[str, Person]) -> None:
    run = live_server.sdk_run(name="hostile")
    _log(run, range(1, 21))
    alice, bob = people["alice"], people["bob"]
    alice.open_run(run.id)
    bob.open_run(run.id)
    cid = alice.comment_on_point("train/loss", 10, HOSTILE)
    for p in (alice, bob):
        p.shows(cid)
        body = f"#comment-{cid} .comment-body"
        assert p.page.locator(f"{body} script").count() == 0
        assert p.page.locator("#comments img, #comments [onerror], #comments [style]").count() == 0
        links = p.page.eval_on_selector_all(f"{body} a", "as => as.map(a => [a.getAttribute('href'), a.rel])")
        assert links and all(not (href or "").lower().startswith("javascript") for href, _ in links), links
        assert all(set(rel.split()) >= {"nofollow", "ugc", "noopener"} for href, rel in links if href), links
        p.page.wait_for_timeout(300)  # an onerror or a script would have run by now
        assert p.dialogs == [] and p.errors == [], (p.dialogs, p.errors)
        assert not [u for u in p.requests if "example.invalid" in u or "example.org" in u]
