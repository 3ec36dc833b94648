"""The run page following a run through the cacheable broadcast (RUNCAST_PUBLIC_FOLLOW=cache;
docs/live.md): an anonymous viewer reads the edge and the pieces, never the stream, and at the
finish (across a resume) holds exactly the API's points; a signed-in viewer keeps the stream; a
delayed run never shows a point before it is due."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from .conftest import main_xs, open_run
from .test_run_page import log_steps, loss
from .truth import assert_page_tells_the_truth

KEYS = ["train/loss"]


def _follow_server(live_server: Any, **env: str) -> Any:
    live_server.env.update({"RUNCAST_PUBLIC_FOLLOW": "cache", **env})
    live_server.restart()
    return live_server


def _requests(page: Any) -> list[str]:
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    return seen


def _log_live(run: Any, steps: range, pause: float = 0.02) -> None:
    for s in steps:
        run.log({"train/loss": loss(s)}, step=s)
        if s % 5 == 0:
            run.flush(timeout=20)
            time.sleep(pause)
    assert run.flush(timeout=20)


def test_an_anonymous_viewer_follows_through_the_cache_to_the_finish_across_a_resume(live_server, page):
    server = _follow_server(live_server)
    run = server.sdk_run(name="followed")
    log_steps(run, range(1, 41))
    seen = _requests(page)
    open_run(page, server, run.id)
    page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
    assert page.evaluate("window.__runcast.stream.mode") == "cache"
    assert page.text_content("#live-state") == "● live"

    _log_live(run, range(41, 161))
    run.finish("failed")
    resumed = server.sdk_run(name="followed", resume=run.id, resume_step=120)
    _log_live(resumed, range(121, 221))
    resumed.finish()
    page.wait_for_function("document.getElementById('fact-step').textContent === '220'", timeout=20000)
    page.wait_for_function("document.getElementById('fact-segments').textContent === '2 (1 resumed)'",
                           timeout=20000)
    compared = assert_page_tells_the_truth(page, server.url, run.id, KEYS, "follow mode at the finish")
    assert compared >= 200
    assert main_xs(page) == list(range(1, 121)) + list(range(121, 221))  # no point missing or doubled
    assert not [u for u in seen if u.endswith("/stream") or "/stream?" in u]  # never the stream
    assert [u for u in seen if "/broadcast/edge" in u]
    assert [u for u in seen if "/broadcast/pieces/" in u and "policy=" in u]
    assert page.errors == []


def test_a_signed_in_viewer_on_the_same_server_keeps_the_stream(live_server, page):
    server = _follow_server(live_server)
    run = server.sdk_run(name="team")
    log_steps(run, range(1, 21))
    r = page.request.post(f"{server.url}/api/v1/session", data={"token": server.token()})
    assert r.ok, r.text()
    seen = _requests(page)
    open_run(page, server, run.id)
    page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
    assert page.evaluate("window.__runcast.stream.mode") == "stream"
    log_steps(run, range(21, 41))
    page.wait_for_function("window.__runcast.pointCount() >= 40", timeout=10000)
    assert [u for u in seen if u.endswith(f"/runs/{run.id}/stream")]
    assert not [u for u in seen if "/broadcast/" in u]
    assert page.errors == []


def test_a_delayed_run_in_follow_mode_never_shows_a_point_before_it_is_due(live_server, page):
    delay = 3.0
    server = _follow_server(live_server)
    run = server.sdk_run(name="delayed")
    log_steps(run, range(1, 11))
    api = httpx.Client(base_url=f"{server.url}/api/v1", timeout=10)
    r = api.put(f"/runs/{run.id}/policy", json={"delay_s": delay},
                headers={"Authorization": f"Bearer {server.token()}"})
    assert r.status_code == 200, r.text
    sent: dict[int, float] = {}
    stop = threading.Event()

    def trainer() -> None:
        step = 11
        while not stop.is_set() and step <= 120:
            sent[step] = time.monotonic()  # stored no earlier than this: due no earlier than + delay
            run.log({"train/loss": loss(step)}, step=step)
            run.flush(timeout=10)
            step += 1
            time.sleep(0.05)

    logger = threading.Thread(target=trainer)
    logger.start()
    try:
        open_run(page, server, run.id)
        assert page.evaluate("window.__runcast.stream.mode") == "cache"
        shown_late = 0
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            xs = main_xs(page)
            after = time.monotonic()  # everything in xs was on screen by now
            early = [s for s in xs if s in sent and sent[s] + delay > after]
            assert early == [], f"shown before due: {early[:5]}"
            shown_late += sum(1 for s in xs if s in sent)
            time.sleep(0.2)
        assert shown_late > 0  # the delayed points did arrive, once due
    finally:
        stop.set()
        logger.join(timeout=20)
    assert page.errors == []
