"""The dashboard's language in the details (issue 29): Traditional Chinese browsers read the
Chinese catalog, the API's errors come in the language the viewer chose (not only the browser's),
the charts' wall-clock axes and hover dates are written as the language writes dates, and the
comments panel's (已编辑) follows Chinese typography."""

from __future__ import annotations

import re
from typing import Any

import pytest

from .comment_seed import seed_comments
from .conftest import POINT_AT, open_run

READY = "!document.documentElement.classList.contains('i18n-pending')"
EN_MONTH = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b")
HOVER_TEXT = "() => (document.querySelector('#chart-main .hoverlayer') || {}).textContent || ''"


@pytest.mark.parametrize("locale", ["zh-TW", "zh-HK", "zh-Hant-TW", "zh-MO"])
def test_traditional_chinese_browsers_read_the_chinese_catalog(live_server: Any, browser: Any, locale: str) -> None:
    context = browser.new_context(locale=locale)
    try:
        page = context.new_page()
        page.goto(live_server.url + "/")
        page.wait_for_function(READY)
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        assert page.text_content("h1") == "公开训练运行，实时直播"
    finally:
        context.close()


def test_errors_come_in_the_chosen_language(live_server: Any, browser: Any) -> None:
    """A reader whose browser speaks English picks 中文: the page's API reads ask for zh-CN, and a
    refusal the page shows is in Chinese."""
    context = browser.new_context(locale="en-US")
    try:
        page = context.new_page()
        page.goto(live_server.url + "/")
        page.wait_for_function(READY)
        page.click("#lang-switch button[lang=zh-CN]")
        page.wait_for_function("document.documentElement.lang === 'zh-CN' && " + READY)
        asked: list[str | None] = []
        # Every JSON read (the live stream, an EventSource, takes no header and shows no error text).
        page.on("request", lambda r: asked.append(r.headers.get("accept-language"))
                if "/api/v1/runs/" in r.url and not r.url.endswith("/stream") else None)
        page.goto(live_server.url + "/runs/nosuchrun0000000")
        page.wait_for_function("!document.getElementById('not-found').hidden")
        assert asked and set(asked) == {"zh-CN"}, asked
        answer = page.evaluate("fetch('/api/v1/runs/nosuchrun0000000', {headers: {'Accept-Language': 'zh-CN'}}).then((r) => r.json())")
        assert answer == {"error": {"message": "未找到运行", "field": "run"}}
    finally:
        context.close()


@pytest.mark.parametrize(("code", "date"), [("zh-CN", r"\d{4}年\d{1,2}月\d{1,2}日"), ("en", r"[A-Z][a-z]{2} \d{1,2}, \d{4}")])
def test_wall_clock_axes_and_hover_dates_in_the_page_language(live_server: Any, browser: Any, code: str, date: str) -> None:
    run = live_server.sdk_run(project="demo", name="clock")
    for s in range(1, 41):
        run.log({"train/loss": 1.0 / s}, step=s)
    assert run.flush(timeout=30)
    context = browser.new_context(locale=code, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        open_run(page, live_server, run.id, "?x=time")
        page.wait_for_selector("#chart-main .xtick")
        ticks = page.eval_on_selector_all("#chart-main .xtick text", "els => els.map((e) => e.textContent)")
        # a reader points at a point (on a wall-clock axis the plot's centre can lie between two
        # bursts of points, out of hover reach)
        x, y = page.evaluate(POINT_AT, ["train/loss", None])
        page.mouse.move(x, y)
        page.wait_for_function(f"({HOVER_TEXT})().length > 0")
        hover = page.evaluate(HOVER_TEXT)
        assert any(re.search(date, tick) for tick in ticks), ticks
        assert re.search(date, hover), hover
        if code == "zh-CN":
            assert not any(EN_MONTH.search(tick) for tick in ticks) and not EN_MONTH.search(hover), (ticks, hover)
    finally:
        context.close()


def test_no_space_before_a_full_width_bracket(live_server: Any, browser: Any) -> None:
    run = live_server.sdk_run(project="demo", name="edited")
    for s in range(1, 31):
        run.log({"train/loss": 1.0 / s}, step=s)
    assert run.flush(timeout=30)
    seed_comments(live_server, "demo", run.id, "train/loss", 20, None)  # one reply is edited
    heads = {}
    for code in ("zh-CN", "en"):
        context = browser.new_context(locale=code)
        try:
            page = context.new_page()
            open_run(page, live_server, run.id)
            page.wait_for_selector("#comments .comment-edited")
            heads[code] = page.evaluate("document.querySelector('#comments .comment-edited').parentElement.textContent")
        finally:
            context.close()
    assert heads["zh-CN"].endswith("（已编辑）") and not re.search(r"\s（已编辑）", heads["zh-CN"]), heads
    assert heads["en"].endswith("UTC (edited)"), heads
