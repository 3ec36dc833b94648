"""The run page in headless Chromium against a real server, fed by the real SDK over HTTP."""

from __future__ import annotations

import math
import threading
import time

import httpx
import numpy as np

from .conftest import main_xs, open_run
from browser.reads import key_reads, metrics_reads

HOSTILE = "<img src=x onerror=alert(1)>"


def loss(step: int) -> float:
    return 3.0 * math.exp(-step / 300) + 0.5 + 0.01 * math.sin(step)


def log_steps(run, steps) -> None:  # type: ignore[no-untyped-def]
    for s in steps:
        run.log({"train/loss": loss(s)}, step=s)
    assert run.flush(timeout=20)


def test_live_points_are_appended_without_reload(live_server, page):
    run = live_server.sdk_run(name="live")
    log_steps(run, range(1, 41))
    open_run(page, live_server, run.id)
    assert main_xs(page) == list(range(1, 41))
    page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
    metrics_calls: list[str] = []
    page.on("request", lambda r: metrics_calls.extend(key_reads(r.url, "train/loss")))

    log_steps(run, range(41, 101))
    page.wait_for_function("window.__runcast.pointCount() >= 100", timeout=5000)
    assert main_xs(page) == list(range(1, 101))  # appended in order, once each
    assert metrics_calls == []  # by the stream (extendTraces), not by refetching
    assert page.text_content("#fact-step") == "100"
    assert page.errors == [] and page.dialogs == []


def test_zoom_fetches_finer_points_for_the_visible_range(live_server, page):
    run = live_server.sdk_run(name="long")
    for lo in range(1, 6001, 500):
        for s in range(lo, lo + 500):
            run.log({"train/loss": loss(s) + (5.0 if s == 3333 else 0.0)}, step=s)
    assert run.flush(timeout=60)
    open_run(page, live_server, run.id)
    before = [x for x in main_xs(page) if 3000 <= x <= 3400]
    assert 0 < len(before) <= 200  # the whole run is bucketed (2 points per pixel: buckets of 4+ steps)
    spike_visible = page.evaluate(
        """() => document.getElementById('chart-main').data
             .some(t => t.name && t.name.endsWith(' max') && t.y.some(v => v > 5))"""
    )
    assert spike_visible  # the min–max band keeps the one-step spike

    with page.expect_request(lambda r: any("start=" in u and "end=" in u for u in metrics_reads(r.url))) as req:
        page.evaluate("Plotly.relayout(document.getElementById('chart-main'), {'xaxis.range': [3000, 3400]})")
    assert any("key=train%2Floss" in u for u in metrics_reads(req.value.url))
    page.wait_for_function(
        """() => document.getElementById('chart-main').data
             .filter(t => t.meta && t.meta.role === 'raw')
             .some(t => t.x.filter(x => x >= 3000 && x <= 3400).length === 401)""",
        timeout=10000,
    )
    after = [x for x in main_xs(page) if 3000 <= x <= 3400]
    assert after == list(range(3000, 3401))  # every raw step of the range
    assert "start=3000" in page.url and "end=3400" in page.url  # the view is in the URL
    assert page.errors == []


def test_markers_for_checkpoint_and_note(live_server, page, tmp_path):
    run = live_server.sdk_run(name="events")
    ckpt = tmp_path / "ckpt_20.pt"
    ckpt.write_bytes(b"weights" * 100)
    log_steps(run, range(1, 31))
    run.checkpoint(ckpt, step=20, metrics={"val/loss": 1.25})
    run.note("lr lowered", step=25)
    assert run.flush(timeout=20)
    open_run(page, live_server, run.id)
    page.wait_for_selector("#timeline li.tl-checkpoint")
    texts = page.evaluate(
        """() => document.getElementById('chart-main').data
             .filter(t => t.meta && t.meta.role === 'markers').flatMap(t => t.text)"""
    )
    assert any(t.startswith("checkpoint @ step 20") for t in texts)
    assert "note @ step 25: lr lowered" in texts
    assert "val/loss 1.25" in page.text_content("#timeline li.tl-checkpoint")

    # A note logged while the page is open appears without a reload.
    page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
    run.note("live note", step=30)
    assert run.flush(timeout=20)
    page.wait_for_function(
        """() => document.getElementById('chart-main').data
             .some(t => t.meta && t.meta.role === 'markers' && t.text.includes('note @ step 30: live note'))""",
        timeout=5000,
    )
    assert page.errors == []


def test_hostile_strings_render_as_text(live_server, page):
    run = live_server.sdk_run(name=HOSTILE, config={"optimizer": HOSTILE})
    log_steps(run, range(1, 11))
    run.note(HOSTILE, step=5)
    assert run.flush(timeout=20)
    open_run(page, live_server, run.id)
    page.wait_for_selector("#timeline li.tl-note")
    assert page.text_content("#run-name") == HOSTILE
    assert HOSTILE in page.text_content("#timeline li.tl-note")
    assert HOSTILE in page.text_content("#config")
    assert page.eval_on_selector_all("#run img", "n => n.length") == 0
    marker_text = page.evaluate(
        """() => document.getElementById('chart-main').data
             .filter(t => t.meta && t.meta.role === 'markers').flatMap(t => t.text)"""
    )
    assert "note @ step 5: &lt;img src=x onerror=alert(1)&gt;" in marker_text
    # Plotly's own DOM (hover labels, legend) holds no element made from the string either.
    page.hover("#chart-main .nsewdrag")
    page.wait_for_timeout(300)
    assert page.eval_on_selector_all("img", "n => n.length") == 0
    assert page.dialogs == [] and page.errors == []


def test_reconnect_after_server_restart_continues_without_gap(live_server, page):
    run = live_server.sdk_run(name="restart")
    log_steps(run, range(1, 31))
    open_run(page, live_server, run.id)
    page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
    metrics_calls: list[str] = []
    page.on("request", lambda r: metrics_calls.extend(key_reads(r.url, "train/loss")))

    live_server.stop()
    page.wait_for_function("!window.__runcast.stream.open", timeout=10000)
    for s in range(31, 61):  # logged while the server is down: the SDK spools them
        run.log({"train/loss": loss(s)}, step=s)
    live_server.start()  # same port, same data dir
    for s in range(61, 91):
        run.log({"train/loss": loss(s)}, step=s)
    run.flush(timeout=30)  # the spooled steps are replayed by the SDK's retry loop

    page.wait_for_function("window.__runcast.pointCount() >= 90", timeout=30000)
    assert main_xs(page) == list(range(1, 91))  # contiguous: no gap, no duplicate
    assert metrics_calls == []  # resumed by Last-Event-ID, not by reloading the data
    assert page.errors == []


def test_restart_segments_and_abandoned_branch(live_server, page):
    run = live_server.sdk_run(name="resumed")
    log_steps(run, range(1, 51))
    run.finish("failed")
    resumed = live_server.sdk_run(name="resumed", resume=run.id, resume_step=40)
    log_steps(resumed, range(41, 71))
    open_run(page, live_server, run.id)
    traces = page.evaluate(
        """() => document.getElementById('chart-main').data.filter(t => t.meta && t.meta.role === 'raw')
             .map(t => ({segment: t.meta.segment, abandoned: t.meta.abandoned, x: Array.from(t.x), color: t.line.color}))"""
    )
    kept0 = next(t for t in traces if t["segment"] == 0 and not t["abandoned"])
    gone0 = next(t for t in traces if t["segment"] == 0 and t["abandoned"])
    kept1 = next(t for t in traces if t["segment"] == 1)
    assert kept0["x"] == list(range(1, 41))  # resumed from the checkpoint of step 40: step 40 is kept
    assert gone0["x"] == list(range(40, 51))  # forks from the last kept point
    assert kept1["x"] == list(range(41, 71))
    assert kept0["color"] != kept1["color"] and "154,154,154" in gone0["color"]
    texts = page.evaluate(
        """() => document.getElementById('chart-main').data
             .filter(t => t.meta && t.meta.role === 'markers').flatMap(t => t.text)"""
    )
    assert any(t.startswith("restart @ step 40") for t in texts)
    assert page.errors == []


def test_a_resume_streamed_while_the_run_is_read_reaches_the_header(live_server, page):
    """The stream opens before the run is read; what it delivers before the answer may be newer
    than it (here a resume's segment, and nothing after it): the page reads the run again."""
    run = live_server.sdk_run(name="resumed")
    log_steps(run, range(1, 51))
    api = httpx.Client(base_url=f"{live_server.url}/api/v1", timeout=10)
    held: list[bool] = []

    def resume_before_answering(route):  # type: ignore[no-untyped-def]
        answer = route.fetch()  # the run as it was: one segment
        if not held:
            held.append(True)
            resumed = live_server.sdk_run(name="resumed", resume=run.id, resume_step=40)
            log_steps(resumed, range(41, 71))
            for _ in range(100):
                if len(api.get(f"/runs/{run.id}").json()["segments"]) == 2:
                    break
                time.sleep(0.1)
            time.sleep(2)  # the stream's messages reach the page, which still waits for this answer
        route.fulfill(response=answer)

    page.route(f"{live_server.url}/api/v1/runs/{run.id}", resume_before_answering)
    open_run(page, live_server, run.id)
    page.wait_for_function(
        "document.getElementById('fact-segments').textContent === '2 (1 resumed)'", timeout=15000
    )
    page.wait_for_function("document.getElementById('fact-step').textContent === '70'", timeout=15000)
    assert held == [True]
    assert page.errors == []


def test_a_resume_reaches_the_header_while_messages_keep_coming(live_server, page):
    """A steady stream of messages (one about every 100 ms, each naming a segment the page's
    read of the run lacks) must not put off the re-read for as long as it flows: the header
    shows the resume while the trainer is still logging."""
    run = live_server.sdk_run(name="steady")
    log_steps(run, range(1, 51))
    open_run(page, live_server, run.id)
    page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
    run.finish("failed")
    resumed = live_server.sdk_run(name="steady", resume=run.id, resume_step=40)
    stop = threading.Event()

    def steady() -> None:
        step = 41
        while not stop.is_set():
            resumed.log({"train/loss": loss(step)}, step=step)
            resumed.flush(timeout=5)
            step += 1
            time.sleep(0.1)

    logger = threading.Thread(target=steady)
    logger.start()
    try:
        page.wait_for_function(
            "document.getElementById('fact-segments').textContent === '2 (1 resumed)'", timeout=8000
        )
    finally:
        stop.set()
        logger.join(timeout=20)
    assert page.errors == []


def test_declared_metrics_set_the_default_axis_and_the_summary(live_server, page):
    """run.define_metric(x="tokens", summary="min"), run.summary, tags and notes, as the page shows them."""
    run = live_server.sdk_run(name="declared", tags=["ablation"], group="g", notes="no warmup")
    run.define_metric("train/loss", x="tokens", summary="min")
    for s in range(1, 101):
        run.log({"train/loss": loss(s), "tokens_seen": float(s * 256)}, step=s)
    run.summary["final_eval"] = 0.75
    run.finish()
    open_run(page, live_server, run.id)
    assert page.input_value("#xmode") == "tokens"
    page.wait_for_function("document.getElementById('chart-main').layout.xaxis.range !== undefined")
    detail = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}", timeout=10).json()
    assert detail["summary"] == {"train/loss": min(loss(s) for s in range(1, 101)), "final_eval": 0.75}
    text = page.text_content("#config")
    assert "ablation" in text and "no warmup" in text and "final_eval" in text and "0.75" in text
    page.select_option("#xmode", "step")  # a choice of the reader's own wins, and stays in the URL
    page.wait_for_function("location.search.includes('x=step')")
    assert page.errors == []


def test_view_state_round_trips_through_the_url(live_server, page):
    run = live_server.sdk_run(name="url")
    for s in range(1, 201):
        run.log({"train/loss": loss(s), "val/loss": loss(s) + 0.1, "lr": 1e-3, "tokens_seen": float(s * 256)}, step=s)
    assert run.flush(timeout=20)
    open_run(page, live_server, run.id, "?keys=val/loss&smooth=0.9&log=1&x=tokens&start=2560&end=25600")
    assert page.input_value("#smoothing") == "0.9"
    assert page.is_checked("#logscale")
    assert page.input_value("#xmode") == "tokens"
    layout = page.evaluate(
        "() => { const l = document.getElementById('chart-main').layout;"
        " return {y: l.yaxis.type, r: l.xaxis.range, title: document.getElementById('chart-main-title').textContent}; }"
    )
    assert layout == {"y": "log", "r": [2560, 25600], "title": "val/loss"}
    page.fill("#smoothing", "0.3")
    page.dispatch_event("#smoothing", "input")
    page.wait_for_function("location.search.includes('smooth=0.3')")
    assert page.errors == []


def test_unknown_run_shows_a_clear_page(live_server, page):
    response = page.goto(f"{live_server.url}/runs/no-such-run-123")
    assert response.status == 200
    page.wait_for_selector("#not-found:not([hidden])")
    # Not signed in: an unknown id and a private run look alike, so the page offers the sign-in.
    assert page.text_content("#not-found h1") == "Private run? Sign in to see it"
    assert "link may be mistyped" in page.text_content("#private-hint")
    assert page.text_content("#missing-id") == "no-such-run-123"
    assert page.is_hidden("#run")
    assert "Traceback" not in page.content()
    assert page.errors == []


def test_phone_width_has_no_horizontal_scroll(live_server, browser):
    run = live_server.sdk_run(name="a rather long run name that has to wrap on a phone screen")
    log_steps(run, range(1, 21))
    context = browser.new_context(viewport={"width": 375, "height": 800}, color_scheme="dark")
    try:
        page = context.new_page()
        for path in ("/", f"/runs/{run.id}"):
            page.goto(live_server.url + path)
            if path != "/":
                page.wait_for_function("window.__runcastDrawn !== undefined", timeout=20000)
            else:
                page.wait_for_selector("#runs tbody tr")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 375, (path, width)
        # Keyboard: Tab moves focus, and the focused element shows an outline.
        page.keyboard.press("Tab")
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline != "none"
    finally:
        context.close()


def test_memory_stays_bounded_while_a_long_run_streams(live_server, browser):
    run = live_server.sdk_run(name="long live", batch_size=1000)
    log_steps(run, range(1, 201))
    context = browser.new_context(viewport={"width": 520, "height": 800})
    try:
        page = context.new_page()
        open_run(page, live_server, run.id)
        page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
        budget = page.evaluate("window.__runcast.charts()[0].budget")
        log_steps(run, range(201, 2 * budget + 1001))
        # Past its budget of points the chart swaps its raw points for the rolled-up view.
        page.wait_for_function(
            f"window.__runcast.charts()[0].level > 0 && window.__runcast.pointCount() <= {budget}", timeout=20000
        )
        xs = main_xs(page)
        assert xs == sorted(xs) and len(xs) <= budget
        assert xs[-1] >= 2 * budget  # and still reaches the newest steps
    finally:
        context.close()


def test_wall_and_relative_time_axes_from_the_servers_step_times(live_server, page):
    """Every run offers wall time and relative time (the server's _timestamp); the x values drawn
    are the API's step times, and the choice survives a reload through the URL."""
    run = live_server.sdk_run(name="timed")
    for s in range(1, 41):
        run.log({"train/loss": loss(s)}, step=s)
        time.sleep(0.02)
    run.finish()
    body = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}/metrics",
                     params={"key": "_timestamp", "max_points": 20000}, timeout=10).json()
    (series,) = body["series"]
    want = np.interp(np.arange(1, 41), series["step"], series["last"])
    raw_x = "() => Array.from(document.getElementById('chart-main').data.find(t => t.meta && t.meta.role === 'raw').x)"
    drawn = "() => {{ try {{ return ({})()[0] {}; }} catch (e) {{ return false; }} }}"
    open_run(page, live_server, run.id)
    assert page.eval_on_selector_all("#xmode option", "os => os.map(o => o.value)") == ["step", "time", "relative"]
    page.select_option("#xmode", "relative")
    page.wait_for_function("location.search.includes('x=relative')")
    page.wait_for_function(drawn.format(raw_x, "=== 0"), timeout=20000)
    # a run of about a second reads in seconds (minutes past 2 minutes, hours past 2 hours)
    assert np.allclose(page.evaluate(raw_x), want - want[0], rtol=0, atol=1e-6)
    assert page.evaluate("document.getElementById('chart-main').layout.xaxis.title.text") == "relative time (s)"
    page.screenshot(path="/tmp/wt/run-relative.png")  # looked at by hand
    # Longer runs: minutes past 2 minutes, hours past 2 hours; maps on one axis share the longest's unit.
    units = page.evaluate("""async () => {
      const { XMap, shareUnit } = await import("/js/xmap.js");
      await (await import("/js/i18n.js")).loadLanguage();  // these module copies are not the bundle's: their catalog read here
      const map = (span) => Object.assign(new XMap("time", "_timestamp", { sinceStart: true }),
                                          { origin: 1.7e9, values: [0, span] });
      const [a, b, c] = [map(90), map(90 * 60), map(5 * 3600)];
      const alone = [a, b, c].map((m) => { shareUnit([m]); return [m.axisTitle, m.toPlot(5400)]; });
      shareUnit([a, b]);
      return [alone, [a.axisTitle, b.axisTitle, a.fromPlot(a.toPlot(5400))]];
    }""")
    assert units == [[["relative time (s)", 5400], ["relative time (min)", 90], ["relative time (h)", 1.5]],
                     ["relative time (min)", "relative time (min)", 5400]]
    page.reload()
    page.wait_for_function(drawn.format(raw_x, "=== 0"), timeout=20000)
    assert page.input_value("#xmode") == "relative"
    page.select_option("#xmode", "time")
    page.wait_for_function(drawn.format(raw_x, "> 1e12"), timeout=20000)
    assert np.allclose(page.evaluate(raw_x), want * 1000, rtol=0, atol=1e-3)
    assert page.evaluate("document.getElementById('chart-main').layout.xaxis.type") == "date"
    page.screenshot(path="/tmp/wt/run-wall.png")
    page.reload()
    page.wait_for_function(drawn.format(raw_x, "> 1e12"), timeout=20000)
    assert page.input_value("#xmode") == "time"
    assert page.errors == []
