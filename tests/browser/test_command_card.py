"""The run page's Control card (docs/commands.md), from the seats of the team, a viewer and the
anonymous public, on a live run whose training loop (the SDK in a thread, as a W&B user's script
runs) opted in with ``run.tunable`` and polls ``run.commands()`` at each step.

Olga (an owner of the project) stops the run from her page: the trainer acknowledges, her card
says "applied at step S", and an anonymous viewer's timeline shows the decision without a reload.
Vic (a viewer) and the anonymous viewer get no card, and their hand-made POSTs are refused, as
are the owner's own cookies sent from another site. A value outside the tunable's bounds is
refused on the page before anything is sent, and the server's 422 (a tampered request) is shown
naming the field. The card in zh-CN; screenshots of both languages. A command to a run whose
trainer is gone expires on time on the open pages, and an anonymous page following the run
through the cache (no stream) sees each decision."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import LiveServer
from .test_oidc import _runcast
from .test_signin import _shots

pytestmark = pytest.mark.slow  # a live run and a browser per test (20-30 s each)

PASSWORD = "a long passphrase"
PEOPLE = {"olga": ("Olga", "owner"), "mia": ("Mia", "member"), "vic": ("Vic", "viewer")}
RUN_READY = "window.__runcastDrawn !== undefined && window.__runcast.stream && window.__runcast.stream.open"
TIMELINE = "() => Array.from(document.querySelectorAll('#timeline .tl-text')).map(p => p.textContent)"
MARKERS = """() => (document.getElementById('chart-main').data || []).filter(t => t.meta && t.meta.role === 'markers')
  .flatMap(t => Array.from(t.text || []))"""


class Trainer:
    """A training loop in a thread: logs a step every 100 ms (lr = 0.1 * lr_scale), takes commands at
    each step boundary: ``stop`` is acknowledged and ends the loop (then ``run.finish()``), ``set``
    is acknowledged (the tunable takes the value), anything else is refused."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.scale = run.tunable("lr_scale", 1.0, min=0.1, max=4.0)
        self.step = 0
        self.stopped_at: int | None = None
        self.acked: dict[str, int] = {}
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        assert self.started.wait(20)

    def _loop(self) -> None:
        for step in range(1, 6000):  # at most ten minutes
            self.step = step
            self.run.log({"train/loss": 2.0 / (1 + step / 50), "lr": 0.1 * self.scale.value}, step=step)
            if step == 20:
                assert self.run.flush(timeout=20)
                self.started.set()
            for cmd in self.run.commands():
                if cmd.kind == "stop":
                    cmd.ack(step=step, message="checkpoint saved, exiting")
                    self.acked[cmd.id], self.stopped_at = step, step
                    self.run.finish()
                    return
                if cmd.kind == "set":
                    cmd.ack(step=step)
                    self.acked[cmd.id] = step
                else:
                    cmd.refuse(f"{cmd.kind} is not supported by this script", step=step)
            time.sleep(0.1)


def _browser_as(browser: Any, server: LiveServer, name: str | None, locale: str = "en-US") -> Any:
    """A page in a context of its own, signed in as ``name`` (a local account) or anonymous."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, locale=locale)
    page = context.new_page()
    page.set_default_timeout(90000)  # a loaded machine: the page draws a live run while it is driven
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and "Failed to load resource" not in m.text and page.errors.append(m.text))
    if name is not None:
        res = context.request.post(server.url + "/api/v1/session/password", data={"name": name, "password": PASSWORD},
                                   headers={"Origin": server.url})
        assert res.status == 200, res.text()
    return page


def _open(page: Any, server: LiveServer, run_id: str) -> None:
    page.goto(f"{server.url}/runs/{run_id}", timeout=90000)
    page.wait_for_function(RUN_READY, timeout=60000)
    # The page's artifacts are in: the card's turn came.
    page.wait_for_function("document.querySelector('#comments .comment-threads')", timeout=60000)


@pytest.fixture
def team(live_server: LiveServer) -> None:
    for name, (display, role) in PEOPLE.items():
        _runcast(live_server, "user", "create", name, "--display-name", display, "--password-stdin", stdin=PASSWORD + "\n")
        _runcast(live_server, "project", "grant", "demo", name, "--role", role)


@pytest.fixture
def trainer(live_server: LiveServer, team: None) -> Iterator[Trainer]:
    out = Trainer(live_server.sdk_run(name="commanded"))
    yield out
    out.thread.join(timeout=1)


def _commands(page: Any, server: LiveServer, run_id: str) -> list[dict[str, Any]]:
    return list(page.context.request.get(f"{server.url}/api/v1/runs/{run_id}/commands").json()["commands"])


def test_an_owner_stops_the_live_run_and_an_anonymous_timeline_shows_it(
        live_server: LiveServer, browser: Any, trainer: Trainer, tmp_path: Path) -> None:
    run_id = trainer.run.id
    olga, public = _browser_as(browser, live_server, "olga"), _browser_as(browser, live_server, None)
    _open(olga, live_server, run_id)
    _open(public, live_server, run_id)
    olga.wait_for_selector("#control-card")
    assert olga.text_content("#control-title") == "Control"
    assert olga.text_content("#control-pause") == "Pause"
    assert public.query_selector("#control-card") is None and "control-card" not in public.content()

    # Stop asks for a reason (as the API does), then for a confirmation; nothing is sent before.
    sent: list[str] = []
    olga.on("request", lambda r: r.method == "POST" and r.url.endswith("/commands") and sent.append(r.url))
    olga.click("#control-stop")
    assert olga.text_content("#control-error") == "Check reason: a reason is required (it goes on the run's public record)"
    olga.fill("#control-reason", "loss diverged")
    olga.click("#control-stop")
    olga.wait_for_selector("#control-confirm")
    assert sent == []
    with olga.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/commands")) as posted:
        olga.click("#control-stop-confirm")
    assert posted.value.status == 201, posted.value.text()
    command = posted.value.json()["command"]

    trainer.thread.join(timeout=30)
    step = trainer.acked[command]
    assert trainer.stopped_at == step
    olga.wait_for_function(f"document.querySelector('#command-{command} .command-state')?.textContent === 'applied at step {step}'",
                           timeout=20000)
    assert olga.text_content(f"#command-{command} .note").endswith("loss diverged")
    # The run finished: the buttons close, and say why.
    olga.wait_for_selector("#control-closed", timeout=20000)
    assert olga.text_content("#control-closed") == "This run is finished: commands go to live runs only."
    assert olga.is_disabled("#control-stop") and olga.is_disabled("#control-set-button-lr_scale")
    olga.locator("#control-card").screenshot(path=str(_shots(tmp_path) / "control-card-stopped-en.png"))

    # The anonymous page was never reloaded: the decision is on its timeline and its chart's markers.
    public.wait_for_function(f"({TIMELINE})().includes('stop: applied at step {step}')", timeout=20000)
    assert "stop, sent by Olga: loss diverged" in public.evaluate(TIMELINE)
    public.wait_for_function(f"({MARKERS})().some(t => t.includes('command') && t.includes('applied at step {step}'))",
                             timeout=20000)
    assert [c["state"] for c in _commands(public, live_server, run_id)] == ["acknowledged"]
    assert olga.errors == [] and public.errors == []


def test_a_viewer_and_the_public_get_no_card_and_their_forged_commands_are_refused(
        live_server: LiveServer, browser: Any, trainer: Trainer) -> None:
    run_id = trainer.run.id
    vic, public, olga = (_browser_as(browser, live_server, n) for n in ("vic", None, "olga"))
    for page in (vic, public):
        _open(page, live_server, run_id)
        page.wait_for_function("document.getElementById('signin').childElementCount > 0")  # its session is known
        assert page.query_selector("#control-card") is None and "control-card" not in page.content()
    url = f"{live_server.url}/api/v1/runs/{run_id}/commands"
    body = {"kind": "stop", "reason": "forged"}
    forge = """([url, body]) => fetch(url, {method: 'POST', headers: {'Content-Type': 'application/json'},
        body: JSON.stringify(body)}).then(async r => [r.status, (await r.json()).error.field])"""
    # From this site's pages (the browser's Sec-Fetch-Site: same-origin): the viewer's role lacks the
    # scope, the anonymous caller has no credentials.
    assert vic.evaluate(forge, [url, body]) == [403, "runcast_session"]
    assert public.evaluate(forge, [url, body]) == [401, "Authorization"]
    # From another site (the cross-site protection): refused whoever's cookie it carries, the owner's too.
    for page, status in ((vic, 403), (olga, 403), (public, 401)):
        res = page.context.request.post(url, data=json.dumps(body), headers={
            "Content-Type": "application/json", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
        assert res.status == status, res.text()
        if page is olga:
            assert res.json()["error"]["field"] == "Origin"
    assert _commands(olga, live_server, run_id) == []  # nothing was written
    assert trainer.stopped_at is None and trainer.thread.is_alive()
    assert vic.errors == [] and public.errors == []


def test_a_tunable_is_set_within_its_bounds(
        live_server: LiveServer, browser: Any, trainer: Trainer, tmp_path: Path) -> None:
    run_id = trainer.run.id
    mia = _browser_as(browser, live_server, "mia")  # a member: the same card as an owner
    _open(mia, live_server, run_id)
    row = "#control-tunables tr[data-tunable=lr_scale]"
    mia.wait_for_selector(row)
    assert mia.text_content(f"{row} .control-current") == "1"
    assert mia.text_content(f"{row} .control-bounds") == "0.1 to 4"
    mia.fill("#control-reason", "halve the learning rate")
    sent: list[str] = []
    mia.on("request", lambda r: r.method == "POST" and r.url.endswith("/commands") and sent.append(r.post_data or ""))

    # Outside the bounds: refused on the page, naming the field; nothing is sent.
    mia.fill("#control-set-lr_scale", "5")
    mia.click("#control-set-button-lr_scale")
    assert mia.text_content("#control-error") == ("Check value: lr_scale must be between 0.1 and 4 "
                                                  "(the bounds the script declared)")
    assert mia.get_attribute("#control-set-lr_scale", "aria-invalid") == "true" and sent == []

    # A tampered request (the page's check bypassed on the way out): the server's 422 names the field.
    def tamper(route: Any) -> None:
        route.continue_(post_data=json.dumps({**json.loads(route.request.post_data), "value": 50}))

    mia.route("**/commands", lambda route: tamper(route) if route.request.method == "POST" else route.continue_())
    mia.fill("#control-set-lr_scale", "0.5")
    with mia.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/commands")) as refused:
        mia.click("#control-set-button-lr_scale")
    assert refused.value.status == 422
    mia.wait_for_function("document.getElementById('control-error').textContent.startsWith('The server refused it')")
    assert mia.text_content("#control-error") == ("The server refused it (422, field value): lr_scale must be at most 4 "
                                                  "(the run's bound)")
    mia.unroute("**/commands")
    assert _commands(mia, live_server, run_id) == []

    # Within them: sent, acknowledged by the loop, and the card's current value follows.
    with mia.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/commands")) as posted:
        mia.click("#control-set-button-lr_scale")
    assert posted.value.status == 201, posted.value.text()
    command = posted.value.json()["command"]
    mia.wait_for_function(f"document.querySelector('#command-{command} .command-state')?.textContent.startsWith('applied at step')",
                          timeout=20000)
    step = trainer.acked[command]
    assert mia.text_content(f"#command-{command} .command-state") == f"applied at step {step}"
    assert mia.text_content(f"#command-{command} strong") == "set lr_scale to 0.5"
    mia.wait_for_function(f"document.querySelector('{row} .control-current').textContent === '0.5'")
    assert trainer.scale.value == 0.5
    # The learning-rate curve changes at the acknowledged step: 0.1 up to it, 0.05 after it.
    lr = f"{live_server.url}/api/v1/runs/{run_id}/metrics?key=lr&max_points=20000"
    deadline = time.monotonic() + 60
    while True:
        series = mia.context.request.get(lr).json()["series"][0]
        points = dict(zip(series["step"], series["last"], strict=True))
        if step + 2 in points or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert set(series["count"]) == {1}  # raw points
    assert all(points[s] == pytest.approx(0.1) for s in range(1, step + 1))
    assert points[step + 1] == pytest.approx(0.05) and points[step + 2] == pytest.approx(0.05)
    mia.locator("#control-card").screenshot(path=str(_shots(tmp_path) / "control-card-en.png"))

    assert mia.errors == []


def test_the_card_in_chinese(live_server: LiveServer, browser: Any, trainer: Trainer, tmp_path: Path) -> None:
    run_id = trainer.run.id
    zh = _browser_as(browser, live_server, "olga", locale="zh-CN")
    # A set sent as the card sends it (the owner's session, from this site), applied by the loop.
    res = zh.context.request.post(f"{live_server.url}/api/v1/runs/{run_id}/commands", headers={"Origin": live_server.url},
                                  data={"kind": "set", "name": "lr_scale", "value": 0.5, "reason": "减半学习率"})
    assert res.status == 201, res.text()
    command = res.json()["command"]
    deadline = time.monotonic() + 60
    while command not in trainer.acked and time.monotonic() < deadline:
        time.sleep(0.2)
    step = trainer.acked[command]
    _open(zh, live_server, run_id)
    row = "#control-tunables tr[data-tunable=lr_scale]"
    zh.wait_for_function(f"document.querySelector('#command-{command} .command-state')?.textContent === '已在第 {step} 步执行'")
    assert zh.text_content("#control-title") == "控制"
    assert [zh.text_content(b) for b in ("#control-stop", "#control-checkpoint", "#control-pause")] == ["停止", "立即保存检查点", "暂停"]
    assert zh.text_content(f"#command-{command} strong") == "将 lr_scale 设为 0.5"
    assert zh.text_content(f"{row} .control-bounds") == "0.1 至 4"
    assert zh.text_content(f"{row} .control-current") == "0.5"
    zh.click("#control-stop")
    assert zh.text_content("#control-error") == "请检查 reason：需要填写原因（会写入运行的公开记录）"
    zh.locator("#control-card").screenshot(path=str(_shots(tmp_path) / "control-card-zh-CN.png"))
    assert zh.errors == []


def test_a_command_to_a_gone_trainer_expires_on_open_pages_and_a_cached_follower_sees_each_decision(
        live_server: LiveServer, browser: Any, team: None) -> None:
    """Anonymous viewers follow through the cache (RUNCAST_PUBLIC_FOLLOW=cache: no stream, no
    `event: commands`); commands expire after 3 s, checked every 0.5 s. A run whose trainer posted
    20 steps and went away: Olga pauses it from her card; the anonymous page's timeline shows the
    decision, then both pages show it expired on time, none reloaded."""
    live_server.env.update({"RUNCAST_PUBLIC_FOLLOW": "cache", "RUNCAST_COMMAND_EXPIRE_S": "3",
                            "RUNCAST_ALERT_CHECK_INTERVAL_S": "0.5"})
    live_server.restart()
    run_id = "gonetrainer01"
    events = [{"type": "run_started", "name": "gone", "config": {}, "code": {}, "env": {}, "seed": None,
               "resume_step": None, "visibility": "public"}]
    events += [{"type": "metrics", "step": s, "values": {"train/loss": 2.0 / s}} for s in range(1, 21)]
    body = {"v": 1, "events": [{"v": 1, "run": run_id, "segment": "segment01", "seq": i, "ts": time.time(), **e}
                               for i, e in enumerate(events)]}
    res = httpx.post(f"{live_server.url}/api/v1/ingest", json=body,
                     headers={"Authorization": f"Bearer {live_server.token()}"}, timeout=30)
    assert res.status_code == 202, res.text  # and the trainer is gone: no heartbeat, no answer taken

    olga, public = _browser_as(browser, live_server, "olga"), _browser_as(browser, live_server, None)
    _open(olga, live_server, run_id)
    _open(public, live_server, run_id)
    assert (olga.evaluate("window.__runcast.stream.mode"), public.evaluate("window.__runcast.stream.mode")) == (
        "stream", "cache")
    olga.wait_for_selector("#control-card")
    olga.fill("#control-reason", "look at the data first")
    with olga.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/commands")) as posted:
        olga.click("#control-pause")
    assert posted.value.status == 201, posted.value.text()
    command = posted.value.json()
    state = f"document.querySelector('#command-{command['command']} .command-state')?.textContent"
    olga.wait_for_function(f"{state} === 'pending'")
    # The page following through the cache gets the decision from the edge, without a reload.
    public.wait_for_function(f"({TIMELINE})().includes('pause, sent by Olga: look at the data first')", timeout=20000)
    # At its time the periodic check expires it: Olga's card and the anonymous timeline say so.
    olga.wait_for_function(f"{state} === 'expired'", timeout=30000)
    assert time.time() >= command["expires_at"]
    public.wait_for_function(f"({TIMELINE})().includes('pause: expired')", timeout=20000)
    listed = _commands(public, live_server, run_id)
    assert [(c["state"], c["message"]) for c in listed] == [("expired", "expired before the trainer acknowledged it")]
    assert olga.text_content("#control-pause") == "Pause"  # nothing was paused
    assert not olga.is_disabled("#control-pause")
    assert olga.errors == [] and public.errors == []
