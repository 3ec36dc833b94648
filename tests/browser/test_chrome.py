"""The run page's chrome tells the truth too: the live indicator follows the run's status, the
notes under the charts follow the store, panels are titled before they load, raw points when
they fit, anomalies in their own lane (grouped when dense), one size per checkpoint, no
overlapping boxes at phone width, and a toolbar with no cloud button that exports SVG and PNG
at publication size."""

from __future__ import annotations

import math
import struct

import httpx

from .conftest import main_xs, open_run
from .truth import assert_page_tells_the_truth

# Every box that must not overlap another in a chart's card: the card's title, Plotly's
# toolbar, the axis titles and the legend.
BOXES = """() => [...document.querySelectorAll('#run .card')].filter(c => c.querySelector('.js-plotly-plot'))
  .map(card => {
    const box = (sel) => [...card.querySelectorAll(sel)].map(n => n.getBoundingClientRect())
      .filter(r => r.width > 0 && r.height > 0).map(r => ({x: r.left, y: r.top, w: r.width, h: r.height}));
    return {card: (card.querySelector('h2') || {}).textContent,
            parts: {title: box('h2'), modebar: box('.modebar'), xtitle: box('.xtitle'), ytitle: box('.ytitle'),
                    legend: box('.legend .bg'), plottitle: box('.gtitle')}};
  })"""


def loss(step: int) -> float:
    return 2.0 + 0.01 * math.sin(step)


def overlap(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def test_live_indicator_follows_the_run_status(live_server, page):
    run = live_server.sdk_run(name="ends")
    for s in range(1, 21):
        run.log({"train/loss": loss(s)}, step=s)
    assert run.flush(timeout=20)
    open_run(page, live_server, run.id)
    page.wait_for_function("document.getElementById('live-state').dataset.state === 'live'", timeout=10000)
    assert "live" in page.text_content("#live-state")
    run.finish()
    page.wait_for_function("document.getElementById('run-status').textContent === 'finished'", timeout=10000)
    assert page.get_attribute("#live-state", "data-state") == "ended"
    assert page.text_content("#live-state") == ""  # no green "live" on a finished run
    assert page.is_hidden("#live-state")
    assert page.errors == []


def test_notes_follow_the_store_as_points_stream_in(live_server, page):
    run = live_server.sdk_run(name="counts")
    for s in range(1, 41):
        run.log({"train/loss": loss(s), "lr": 0.1}, step=s)
    assert run.flush(timeout=20)
    open_run(page, live_server, run.id)
    page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
    assert page.text_content("#chart-main-note") == "40 points (every logged step)."
    for s in range(41, 101):
        run.log({"train/loss": loss(s), "lr": 0.1}, step=s)
    assert run.flush(timeout=20)
    page.wait_for_function(
        "document.getElementById('chart-main-note').textContent === '100 points (every logged step).'", timeout=10000
    )
    assert main_xs(page) == list(range(1, 101))
    # A checkpoint and a note (markers only) keep every live point.
    run.note("halfway", step=100)
    assert run.flush(timeout=20)
    page.wait_for_function(
        """() => document.getElementById('chart-main').data
             .some(t => t.meta && t.meta.role === 'markers' && t.text.some(x => x.includes('halfway')))""",
        timeout=10000,
    )
    assert main_xs(page) == list(range(1, 101))
    assert page.text_content("#chart-main-note") == "100 points (every logged step)."
    assert_page_tells_the_truth(page, live_server.url, run.id, ["lr", "train/loss"], "after live points and a note")
    assert page.errors == []


def test_raw_points_when_they_fit_at_any_width(live_server, browser):
    """A finished 400-step run is drawn point by point, on a desktop and on a phone."""
    run = live_server.sdk_run(name="four hundred")
    for s in range(1, 401):
        metrics = {"train/loss": loss(s), "grad_norm": 1.0 + (s % 7) / 10}
        if s % 20 == 0:
            metrics["val/loss"] = loss(s) + 0.1
        run.log(metrics, step=s)
    run.finish()
    for width in (1280, 390):
        context = browser.new_context(viewport={"width": width, "height": 2400})
        try:
            page = context.new_page()
            open_run(page, live_server, run.id)
            page.wait_for_function("window.__runcast.charts().every(c => c.points > 0)", timeout=20000)
            assert page.text_content("#chart-main-note") == "420 points (every logged step)."
            assert all(c["level"] == 0 for c in page.evaluate("window.__runcast.charts()")), width
            assert sorted(main_xs(page)) == sorted([*range(1, 401), *range(20, 401, 20)])
            assert_page_tells_the_truth(page, live_server.url, run.id, ["grad_norm", "train/loss", "val/loss"], f"{width}px")
        finally:
            context.close()


def test_panels_are_titled_before_they_load(live_server, page):
    run = live_server.sdk_run(name="many keys")
    keys = ["train/loss", "lr", "grad_norm", "tokens_per_s", *(f"extra/{i}" for i in range(6))]
    for s in range(1, 31):
        run.log({k: float(s) for k in keys}, step=s)
    assert run.flush(timeout=20)
    open_run(page, live_server, run.id)
    panels = page.evaluate(
        """() => [...document.querySelectorAll('#panels .panel')].map(p => ({
             title: p.querySelector('h2').textContent, drawn: !!p.querySelector('.js-plotly-plot'),
             placeholder: (p.querySelector('.placeholder') || {}).textContent || null,
             height: p.querySelector('.plot').getBoundingClientRect().height}))"""
    )
    assert [p["title"] for p in panels] == [
        "lr — learning rate", "grad_norm — gradient norm", "tokens_per_s — throughput (tokens/s)",
        *(f"extra/{i}" for i in range(6)),
    ]
    waiting = [p for p in panels if not p["drawn"]]
    assert waiting, "every panel loaded at once: the test needs panels below the fold"
    for p in waiting:
        assert p["placeholder"] == "Loads when scrolled into view." and p["height"] > 100, p
    page.locator("#panels .panel").last.scroll_into_view_if_needed()
    page.wait_for_function("document.querySelectorAll('#panels .panel .js-plotly-plot').length >= 6", timeout=10000)
    assert page.locator("#panels .panel .placeholder").count() < len(waiting)
    assert page.errors == []


def test_anomalies_have_their_own_lane_and_group_when_dense(live_server, page):
    run = live_server.sdk_run(name="spiky")
    # Two-point spikes: a one-point jump is back at once and opens no alert (docs/alerts.md).
    spikes = {s + d for s in (*range(300, 360, 5), 800) for d in (0, 1)}
    for s in range(1, 1001):
        run.log({"train/loss": loss(s) + (30.0 if s in spikes else 0.0)}, step=s)
    run.note("a note", step=500)
    assert run.flush(timeout=30)
    open_run(page, live_server, run.id)
    alerts = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}/alerts", timeout=30).json()["alerts"]
    assert len(alerts) >= 10, alerts  # one per spike
    page.wait_for_function(
        f"""() => document.getElementById('chart-main').data.filter(t => t.meta && t.meta.role === 'anomalies')
              .reduce((n, t) => n + t.meta.counts.reduce((a, b) => a + b, 0), 0) === {len(alerts)}""",
        timeout=10000,
    )
    lanes = page.evaluate(
        """() => document.getElementById('chart-main').data.filter(t => t.meta && ['markers', 'anomalies'].includes(t.meta.role))
             .map(t => ({role: t.meta.role, y: [...new Set(t.y)], counts: t.meta.counts || null, hover: t.hovertext || t.text}))"""
    )
    events = next(lane for lane in lanes if lane["role"] == "markers")
    anomalies = next(lane for lane in lanes if lane["role"] == "anomalies")
    assert len(events["y"]) == len(anomalies["y"]) == 1 and events["y"] != anomalies["y"]  # two lanes
    assert not any("anomaly" in h for h in events["hover"])
    assert len(anomalies["counts"]) < len(alerts)  # the dense ones are one marker
    group = anomalies["hover"][anomalies["counts"].index(max(anomalies["counts"]))]
    assert group.startswith(f"{max(anomalies['counts'])} anomalies<br>")
    assert group.count("anomaly @ step") == min(max(anomalies["counts"]), 12)  # the hover lists the group
    # Zoomed in, the group comes apart: one marker per anomaly.
    page.evaluate("Plotly.relayout(document.getElementById('chart-main'), {'xaxis.range': [290, 370]})")
    page.wait_for_function(
        """() => document.getElementById('chart-main').data.filter(t => t.meta && t.meta.role === 'anomalies')
             .every(t => t.meta.counts.every(c => c === 1))""",
        timeout=10000,
    )
    assert page.errors == []


def test_one_size_for_a_checkpoint_everywhere(live_server, page, tmp_path):
    run = live_server.sdk_run(name="pruned")
    root = live_server.data_dir / "storage" / "ck"
    root.mkdir(parents=True, exist_ok=True)
    first = root / "step10.pt"
    first.write_bytes(b"x" * 5000)
    second = root / "step20.pt"
    second.write_bytes(b"y" * 7000)
    for s in range(1, 21):
        run.log({"train/loss": loss(s)}, step=s)
    run.checkpoint(first, step=10)
    run.checkpoint(second, step=20)
    first.unlink()
    run.checkpoint(first, step=10, status="pruned")
    assert run.flush(timeout=20)
    open_run(page, live_server, run.id)
    page.wait_for_selector("#checkpoints li.ck-pruned")
    panel = dict(page.evaluate(
        "() => [...document.querySelectorAll('#checkpoints li.ck')].map(li => [li.querySelector('.ck-step').textContent, li.querySelector('.ck-size').textContent])"
    ))
    assert panel == {"step 20": "6.8 KiB", "step 10": "4.9 KiB"}
    timeline = page.evaluate(
        """() => [...document.querySelectorAll('#timeline li.tl-checkpoint')]
             .map(li => [li.querySelector('button').textContent, li.querySelector('.tl-text').textContent])"""
    )
    assert len(timeline) == 3  # recorded twice, pruned once
    for step, text in timeline:
        assert panel[step] in text, (step, text)
    assert any(text.startswith("checkpoint pruned · 4.9 KiB") for _, text in timeline)
    assert "0 B" not in page.text_content("#timeline")
    assert page.errors == []


def test_phone_width_has_no_overlapping_boxes(live_server, browser):
    run = live_server.sdk_run(name="a run with a long enough name to wrap twice on a phone screen")
    for s in range(1, 201):
        run.log({"train/loss": loss(s), "val/loss": loss(s) + 0.1, "lr": 1e-3, "grad_norm": 1.0}, step=s)
    run.data_mix({"code": 0.7, "prose": 0.3}, step=1)
    run.data_mix({"code": 0.4, "prose": 0.6}, step=100)
    run.note("halfway", step=100)
    assert run.flush(timeout=20)
    context = browser.new_context(viewport={"width": 390, "height": 3000})
    try:
        page = context.new_page()
        open_run(page, live_server, run.id)
        page.wait_for_selector("#mix-card:not([hidden]) .js-plotly-plot")
        page.wait_for_function("document.querySelectorAll('#panels .js-plotly-plot').length === 2", timeout=10000)
        page.wait_for_timeout(500)
        cards = page.evaluate(BOXES)
        assert len(cards) == 4  # loss, data mix, two panels
        for card in cards:
            parts = [(name, box) for name, boxes in card["parts"].items() for box in boxes]
            names = {name for name, _ in parts}
            assert {"title", "modebar", "xtitle", "legend"} <= names or card["card"].startswith(("lr", "grad")), card
            for i, (a, box_a) in enumerate(parts):
                for b, box_b in parts[i + 1 :]:
                    assert not overlap(box_a, box_b), (card["card"], a, box_a, b, box_b)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390

        # The runs list as cards: no label wraps ("Nam e"), nothing wider than the screen.
        page.goto(live_server.url + "/")
        page.wait_for_selector("#runs tbody tr")
        lines = page.evaluate(
            """() => [...document.querySelectorAll('#runs .cell-label')].map(n => {
                 const r = document.createRange(); r.selectNodeContents(n);
                 return [n.textContent, r.getClientRects().length]; })"""
        )
        assert lines and all(n == 1 for _, n in lines), lines
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        context.close()


def test_toolbar_has_no_cloud_button_and_exports_svg_and_png(live_server, page):
    run = live_server.sdk_run(name="export me")
    for s in range(1, 51):
        run.log({"train/loss": loss(s)}, step=s)
    assert run.flush(timeout=20)
    open_run(page, live_server, run.id)
    page.hover("#chart-main .nsewdrag")
    titles = page.eval_on_selector_all("#chart-main .modebar-btn", "bs => bs.map(b => b.getAttribute('data-title'))")
    assert titles and not [t for t in titles if any(w in t.lower() for w in ("share", "cloud", "chart studio", "edit in"))]
    assert not page.eval_on_selector_all(".modebar-btn", "bs => bs.filter(b => /plotly/i.test(b.getAttribute('href') || '')).length")

    with page.expect_download() as got:
        page.click("#chart-main .modebar-btn[data-title='Download plot as a PNG']")
    png = got.value
    data = png.path().read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1600, 900)
    assert png.suggested_filename.endswith(".png") and "export_me" in png.suggested_filename

    with page.expect_download() as got:
        page.click("#chart-main .modebar-btn[data-title^='Download plot as SVG']")
    svg = got.value.path().read_text(encoding="utf-8")
    assert svg.startswith("<svg") and 'width="1600"' in svg and 'height="900"' in svg
    assert got.value.suggested_filename.endswith(".svg")
    assert page.errors == []
