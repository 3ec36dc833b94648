"""Every page in zh-CN and in en (issue 29): each visible string is the run's data or a message
of that language's catalog; the language follows the browser, the switch is remembered.

The walk reads the rendered DOM in Chromium under Playwright's ``locale=``: every visible text
node, and the ``title``, ``aria-label``, ``placeholder`` and Plotly's ``data-title`` attributes.
A text passes when it is inside an element marked ``data-user`` (run names, metric keys, notes,
config values), is a number or a date (no letters), matches one message of the catalog (its
``{placeholders}`` standing for anything), or, inside a chart, is one of the fixture's own names.
Text formatted by ``Intl`` (``data-intl``: heartbeat ages, dates) must carry no Latin word under
zh-CN but a time zone's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import runcast
from runcast import system
from runcast.sender.transport import make_transport

from .comment_seed import TEAM, seed_comments, signed_in
from .conftest import open_run
from .test_system_panel import T0, Fixed

pytestmark = pytest.mark.slow  # a live run and a browser per test (20-30 s each)

CATALOGS = Path(__file__).resolve().parents[2] / "frontend" / "i18n"
PROJECT, RUN_NAME, KEYS = "demo", "i18n-run", ("train/loss", "lr", "val/loss")
NOTE = "switched to the second data shard"
SOURCES = ("code", "prose")  # the data mix's sources
RANKS = ("node0/rank0", "node0/rank1")  # the system panel's lines
USER_WORDS = {PROJECT, RUN_NAME, *KEYS, NOTE, f"{RUN_NAME} ({PROJECT})", f"i18n-other ({PROJECT})", *SOURCES, *RANKS}  # chart legends
CODE = {"sha": "0123456789abcdef0123456789abcdef01234567", "branch": "main", "remote": "https://example.org/lab/model.git",
        "dirty": True, "diff": "diff --git a/train.py b/train.py\n+lr = 3e-4\n"}
# Every panel of the run page has something to show (the threads: a step's, an alert's, the report's) (run page: media loads in view, so the window is tall).
RUN_READY = " && ".join([
    "window.__runcastDrawn !== undefined", "document.querySelector('#timeline li')",
    "document.querySelector('#sample-view .sample-meta')", "document.querySelectorAll('#media .media-key').length === 3",
    "document.querySelector('#media .strip li')", "document.querySelector('#media .media-table table')",
    "document.querySelector('#media canvas.heatmap[aria-label*=\"–\"]')", "document.querySelector('#chart-mix.js-plotly-plot')",
    "document.querySelectorAll('#system-panels .js-plotly-plot').length === 2", "document.querySelector('#estimate-table')",
    "document.querySelector('#revisions li.revision')", "document.querySelector('#evals-card:not([hidden]) #evals > *')",
    "document.querySelectorAll('#comments .comment-thread').length === 3", "document.querySelector('#reports a')",
])
# Signed in as the team: the composer's note, held and reported comments, the moderation buttons.
RUN_READY_TEAM = RUN_READY.replace("=== 3", "=== 3 && document.querySelector('#comments .comment-state')")
# A published report of the run (docs/reports.md): its page with a block of every kind, drawn.
REPORT_BODY = f"""{NOTE}

```runcast-chart keys=train/loss,val/loss from=1 to=400
```

```runcast-samples from=100 to=300
```

```runcast-evals from=1 to=400
```

```runcast-checkpoint step=300
```

```runcast-checkpoint step=7
```

```runcast-changes from=1 to=400
```

```runcast-samples from=390 to=400
```
"""
REPORT_READY = ("document.querySelectorAll('.runcast-block[data-filled]').length === 7"
                " && document.querySelector('#report-body .js-plotly-plot')")
REPORT_READY_TEAM = REPORT_READY + " && !document.getElementById('report-comment-form').hidden && document.querySelector('#report-comments li')"
REPORT_MISSING = "/not found|未找到/.test(document.getElementById('report-status').textContent)"
OPEN_FOLDS = "document.querySelectorAll('details').forEach((d) => { d.open = true; })"
# The composer of a new thread (a click on a point of the loss chart, as a reader clicks it), then the other forms.
CLICK_POINT = ("(() => { const gd = document.getElementById('chart-main'); const tr = gd.data.find((d) => d.meta && ['raw', 'smooth'].includes(d.meta.role));"
               " gd.emit('plotly_click', {points: [{data: tr, x: tr.x[10]}]}); })()")
OPEN_FORMS = (OPEN_FOLDS + "; " + CLICK_POINT
              + "; ['edit', 'report', 'reply'].forEach((a) => document.querySelector(`#comments button[data-action=${a}]`).click())")

WALK = """() => {
  const lang = document.documentElement.lang;
  const out = {texts: [], intl: [], attrs: [], lang, title: document.title};
  const visible = (el) => el.checkVisibility ? el.checkVisibility({visibilityProperty: true}) : !!el.offsetParent;
  const inChart = (el) => !!el.closest('.js-plotly-plot');
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    const text = node.textContent.replace(/\\s+/g, ' ').trim();
    if (!text || !el || el.closest('script,style,noscript,[data-user]')) continue;
    if (el.closest('[lang]') !== document.documentElement) continue;  // marked as its own language: the switch's names
    if (!visible(el)) continue;
    if (el.closest('.xtick,.ytick,.x2tick,.y2tick')) continue;  // axis numbers and dates
    const where = (el.id ? '#' + el.id : el.tagName.toLowerCase()) + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ')[0] : '');
    (el.closest('[data-intl]') ? out.intl : out.texts).push({text, where, chart: inChart(el)});
  }
  for (const el of document.querySelectorAll('[title],[aria-label],[placeholder],[data-title]')) {
    if (el.closest('[lang]') !== document.documentElement || el.closest('[data-user]')) continue;
    for (const name of ['title', 'aria-label', 'placeholder', 'data-title']) {
      const v = el.getAttribute(name);
      if (v && v.trim() && !(name === 'title' && el.closest('svg'))) out.attrs.push({text: v.replace(/\\s+/g, ' ').trim(), where: el.tagName.toLowerCase() + '@' + name, chart: inChart(el)});
    }
  }
  return out;
}"""


def _pattern(message: str) -> str:
    """A regex for what ``message`` (ICU MessageFormat) renders to: each placeholder and ``#`` match anything."""
    i = 0

    def block(in_plural: bool) -> str:
        nonlocal i
        out = []
        while i < len(message) and message[i] != "}":
            c = message[i]
            if c == "{":
                out.append(argument())
            elif c == "#" and in_plural:
                out.append(".+?")
                i += 1
            elif c == "'" and message[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
            else:
                out.append(re.escape(c))
                i += 1
        return "".join(out)

    def argument() -> str:
        nonlocal i
        head = re.compile(r"\{\s*[^\s,{}]+\s*(?:,\s*([a-z]+)\s*)?([,}])").match(message, i)
        assert head, message
        i = head.end()
        kind, sep = head.group(1), head.group(2)
        if sep == "}":
            return ".+?"
        options = []
        while True:
            option = re.compile(r"\s*([^\s{}]+)\s*\{|\s*\}").match(message, i)
            assert option, message
            i = option.end()
            if option.group(1) is None:
                break
            options.append(block(kind == "plural"))
            i += 1  # the option's }
        return "(?:" + "|".join(options) + ")"

    return block(False)


def catalog_patterns(code: str) -> list[re.Pattern[str]]:
    messages = json.loads((CATALOGS / f"{code}.json").read_text(encoding="utf-8"))
    pats = []
    for key, msg in messages.items():
        if key.startswith("date."):
            continue  # the order of a date's parts: Intl text, checked apart (data-intl)
        text = re.sub(r"\s+", " ", msg).strip()
        pat = re.compile(_pattern(text), re.S)
        if pat.fullmatch("Qx untranslated words Qx"):
            continue  # a message that is (or may be) placeholders alone would pass any text: it vouches for none
        pats.append(pat)
    return pats


NUMBERISH = re.compile(r"[\d\s.,:;%+\-−–—×e/()<>≤≥=≠·…✕×↗●↑↓◀▶]*|[\d.,\s]+(B|KiB|MiB|GiB|TiB|kB|MB|GB|TB)|[0-9a-f]{7,64}")


def problems(found: dict[str, Any], code: str) -> list[str]:
    pats = catalog_patterns(code)
    bad = []

    def ok(text: str, chart: bool) -> bool:
        if NUMBERISH.fullmatch(text) or text in USER_WORDS:
            return True
        if chart and all(part.strip() in USER_WORDS for part in re.split(r"[,·]", text)):
            return True  # a legend entry: the fixture's metric names
        return any(p.fullmatch(text) for p in pats)

    assert found["lang"] == code
    for item in found["texts"] + found["attrs"]:
        if not ok(item["text"], item["chart"]):
            bad.append(f"{item['where']}: {item['text']!r}")
    if not any(p.fullmatch(found["title"]) for p in pats):
        bad.append(f"title: {found['title']!r}")
    for item in found["intl"]:
        if code == "zh-CN" and re.search(r"[A-Za-z]{2,}", re.sub(r"\b(UTC|GMT)\b", "", item["text"])):
            bad.append(f"{item['where']} (Intl): {item['text']!r}")
    return bad


def seeded_runs(live_server: Any, monkeypatch: Any) -> tuple[Any, Any]:
    """A run with every panel's data (metrics, a note, a checkpoint, an alert, samples, an evaluation,
    images, tables, histograms, a data mix, system metrics of two ranks, a config the memory
    estimate reads, a code revision); and a second run."""
    monkeypatch.setattr(runcast.runtime, "code_revision", lambda *a, **k: dict(CODE))
    config = {"lr": 3e-4, "batch": 64, "n_params": 124_000_000, "n_layer": 12, "n_embd": 768, "n_head": 12, "block_size": 1024}
    run = live_server.sdk_run(project=PROJECT, name=RUN_NAME, config=config, capture_code=True, system_metrics=False)
    run.data_mix({SOURCES[0]: 0.7, SOURCES[1]: 0.3}, step=1)
    run.data_mix({SOURCES[0]: 0.4, SOURCES[1]: 0.6}, step=200)
    for s in range(1, 401):
        loss = 4.0 / (1 + s / 50) + (30.0 if s in (200, 201) else 0.0)
        run.log({"train/loss": loss, "lr": 3e-4 * min(1, s / 50)}, step=s)
        if s % 50 == 0:
            run.log({"val/loss": loss * 1.05}, step=s)
    run.note(NOTE, step=250)
    ckpt = live_server.data_dir / "storage" / PROJECT / "i18n" / "step300.pt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"weights")
    run.checkpoint(ckpt, step=300)
    grid = np.arange(64, dtype=np.uint8).reshape(8, 8) * 4
    for step, output in ((100, " Lyon."), (200, " Paris, I think."), (300, " Paris.")):
        run.log({"gen/grid": runcast.Image(grid + step // 100, caption="a grid"),
                 "val/worst": runcast.Table(columns=["prompt", "loss"], rows=[["a", 3.5 - step / 100]]),
                 "weights/w0": runcast.Histogram(np.linspace(-1, 1, 1000) * step / 100, bins=8)}, step=step)
        run.log_samples([{"prompt": "The capital of France is", "output": output, "reference": " Paris",
                          "scores": {"exact": float(step == 300)}, "settings": {"temperature": 0.7}},
                         {"prompt": "2 + 2 =", "output": " 4", "prompt_id": "arith"}], step=step)
    run.log_eval({"hellaswag": {"acc": 0.31}}, step=300, suite="lm-eval-harness", checkpoint=300, n=100)
    assert run.flush(timeout=30)
    transport = make_transport(live_server.url, live_server.token(PROJECT))
    for rank, values in enumerate(([40.0, 60.0, 50.0], [80.0, 20.0, 55.0])):
        clock = [T0 + rank * 0.3]
        sampler = system.SystemSampler(
            run=run.id, segment=run.segment, rank=rank, prefix=f"system/{RANKS[rank]}", interval=1.0,
            collector=Fixed(values), transport=transport, clock=lambda clock=clock: clock[0],  # type: ignore[arg-type]
        )
        for _ in values:
            sampler.sample_once()
            clock[0] += 1.0
        sampler._send(10.0)
    other = live_server.sdk_run(project=PROJECT, name="i18n-other")
    for s in range(1, 101):
        other.log({"train/loss": 3.0 / (1 + s / 40)}, step=s)
    assert other.flush(timeout=30)
    return run, other


def publish_report(server: Any, run_id: str) -> str:
    """A published report on the run (its page's path), with a comment of the team on it."""
    team = {"Authorization": f"Bearer {server.token(PROJECT)}"}
    api = f"{server.url}/api/v1/runs/{run_id}/reports"
    made = httpx.post(api, json={"title": RUN_NAME, "body": REPORT_BODY, "from_step": 0, "to_step": 400}, headers=team, timeout=10)
    assert made.status_code == 201, made.text
    assert httpx.post(f"{api}/1/publish", json={}, headers=team, timeout=10).status_code == 200
    mia = signed_in(server.url, TEAM)
    res = mia.post(f"/api/v1/runs/{run_id}/comments", json={"body": NOTE, "anchor": {"kind": "report", "id": 1}})
    assert res.status_code == 201, res.text
    mia.close()
    return f"/runs/{run_id}/reports/1"


def walk(browser: Any, url: str, code: str, ready: str, *, before: str | None = None, who: str | None = None) -> list[str]:
    context = browser.new_context(viewport={"width": 1280, "height": 6000}, locale=code)  # every lazy panel in view
    try:
        if who:  # the session's cookies, set in this context as the sign-in form sets them
            base = url.split("/runs/")[0]
            client = signed_in(base, who)
            context.add_cookies([{"name": c.name, "value": c.value or "", "url": base} for c in client.cookies.jar])
            client.close()
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        try:
            page.wait_for_function(ready, timeout=20000)
        except Exception as err:
            unmet = [part for part in ready.split(" && ") if not page.evaluate(f"() => !!({part})")]
            raise AssertionError(f"{url}: not ready ({err}): {unmet}; page errors: {errors}") from None
        page.wait_for_timeout(500)  # the panels' reads
        if before:
            page.evaluate(before)
            page.wait_for_timeout(300)  # what a fold draws once opened
        if before == OPEN_FORMS:  # every form is open, the composer's Post included
            assert page.locator("#comment-new button[type=submit]").count() == 1, "the composer did not open"
        found = page.evaluate(WALK)
        assert errors == []
        return problems(found, code)
    finally:
        context.close()


@pytest.mark.parametrize("code", ["zh-CN", "en"])
def test_every_visible_string_is_data_or_the_catalogs(live_server: Any, browser: Any, monkeypatch: Any, code: str) -> None:
    run, other = seeded_runs(live_server, monkeypatch)
    for _ in range(100):  # the spike's alert, opened by the worker
        if httpx.get(f"{live_server.url}/api/v1/runs/{run.id}/alerts", timeout=10).json()["alerts"]:
            break
        import time

        time.sleep(0.2)
    alerts = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}/alerts", timeout=10).json()["alerts"]
    seed_comments(live_server, PROJECT, run.id, "train/loss", 200, alerts[0]["id"] if alerts else None)
    base = live_server.url
    report = publish_report(live_server, run.id)
    open_signin = "document.querySelector('#signin details') && (document.querySelector('#signin details').open = true)"
    pages = [
        (f"{base}/", "document.querySelector('#runs tbody tr')", open_signin),
        (f"{base}/runs/{run.id}", RUN_READY, OPEN_FOLDS),
        (f"{base}/runs/no-such-run", "!document.getElementById('not-found').hidden", None),
        (f"{base}/compare?runs={run.id},{other.id}&keys=train/loss", "document.querySelector('#charts .js-plotly-plot')", None),
        (f"{base}/embed/runs/{run.id}?key=train/loss", "document.querySelector('#embed-chart.js-plotly-plot')", None),
    ]
    bad = []
    for url, ready, before in pages:
        bad += [f"{url.removeprefix(base)} {b}" for b in walk(browser, url, code, ready, before=before)]
    bad += [f"/runs/{run.id} ({TEAM}) {b}" for b in walk(browser, f"{base}/runs/{run.id}", code, RUN_READY_TEAM, before=OPEN_FORMS, who=TEAM)]
    bad += [f"{report} {b}" for b in walk(browser, base + report, code, REPORT_READY)]
    bad += [f"{report} ({TEAM}) {b}" for b in walk(browser, base + report, code, REPORT_READY_TEAM, who=TEAM)]
    missing = report.replace("/reports/1", "/reports/9")
    bad += [f"{missing} {b}" for b in walk(browser, base + missing, code, REPORT_MISSING)]
    assert bad == [], "\n".join(bad)


def test_language_from_the_browser_and_the_switch_is_remembered(live_server: Any, browser: Any) -> None:
    for locale, expected in (("zh-SG", "zh-CN"), ("zh", "zh-CN"), ("fr-FR", "en"), ("en-GB", "en")):
        context = browser.new_context(locale=locale)
        page = context.new_page()
        page.goto(live_server.url + "/")
        page.wait_for_function("!document.documentElement.classList.contains('i18n-pending')")
        assert page.evaluate("document.documentElement.lang") == expected, locale
        context.close()
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    page.goto(live_server.url + "/")
    page.wait_for_function("!document.documentElement.classList.contains('i18n-pending')")
    assert page.text_content("h1") == "Public training runs, broadcast live"
    page.click("#lang-switch button[lang=zh-CN]")
    page.wait_for_function("document.documentElement.lang === 'zh-CN' && !document.documentElement.classList.contains('i18n-pending')")
    assert page.text_content("h1") == "公开训练运行，实时直播"
    page.goto(live_server.url + "/compare")  # another page: the choice holds
    page.wait_for_function("document.documentElement.lang === 'zh-CN'")
    assert page.text_content("h1") == "对比运行"
    assert "runcast.lang" in page.evaluate("Object.keys(localStorage)") and page.evaluate("document.cookie") == ""
    context.close()


def test_pages_are_the_same_bytes_for_every_language(live_server: Any) -> None:
    en = httpx.get(live_server.url + "/", headers={"Accept-Language": "en"}, timeout=10)
    zh = httpx.get(live_server.url + "/", headers={"Accept-Language": "zh-CN"}, timeout=10)
    assert en.content == zh.content and en.headers["etag"] == zh.headers["etag"]
    catalogs = json.loads(re.search(rb'id="runcast-catalogs">([^<]*)<', en.content).group(1))
    assert set(catalogs) == {"en", "zh-CN"}
    answer = httpx.get(live_server.url + catalogs["zh-CN"], timeout=10)
    assert answer.status_code == 200 and "immutable" in answer.headers["cache-control"]
    assert answer.json()["nav.compare"] == "对比"


def test_the_static_text_is_hidden_until_its_language_is_set(live_server: Any, browser: Any) -> None:
    """No English flash: until the catalog is in, the pages' static words are not painted."""
    context = browser.new_context(locale="zh-CN")
    page = context.new_page()
    held = []
    page.route("**/i18n/zh-CN.json*", lambda route: held.append(route))
    page.goto(live_server.url + "/", wait_until="domcontentloaded")
    page.wait_for_function("document.querySelector('h1')")
    assert page.evaluate("getComputedStyle(document.querySelector('h1')).visibility") == "hidden"
    page.wait_for_timeout(300)
    for route in held:
        route.continue_()
    page.wait_for_function("document.documentElement.lang === 'zh-CN'")
    assert page.evaluate("getComputedStyle(document.querySelector('h1')).visibility") == "visible"
    context.close()


def test_screenshots_of_the_run_page_and_a_report(live_server: Any, browser: Any, monkeypatch: Any, tmp_path: Path) -> None:
    """The run page and a report's page in both languages, for a person to look at (I18N_SCREENSHOT_DIR keeps them)."""
    import os

    run, _ = seeded_runs(live_server, monkeypatch)
    seed_comments(live_server, PROJECT, run.id, "train/loss", 200, None)
    report = publish_report(live_server, run.id)
    out = Path(os.environ.get("I18N_SCREENSHOT_DIR") or tmp_path)
    for code in ("zh-CN", "en"):
        context = browser.new_context(viewport={"width": 1400, "height": 1100}, locale=code)
        page = context.new_page()
        open_run(page, live_server, run.id)
        page.wait_for_selector("#checkpoints li.ck", timeout=15000)
        for card, content in (("#samples-card", "#sample-view .sample-meta"), ("#media-card", "#media .media-table table"),
                              ("#estimate-card", "#estimate-table")):
            page.locator(card).scroll_into_view_if_needed(timeout=15000)  # a panel reads once in view
            page.wait_for_selector(content, timeout=15000)
        page.evaluate(OPEN_FOLDS.replace("'details'", "'details:not(.signin-box)'"))  # the sign-in form would cover the header
        page.wait_for_timeout(800)
        page.screenshot(path=str(out / f"run-{code}.png"), full_page=True)
        page.goto(live_server.url + report)
        page.wait_for_function(REPORT_READY, timeout=20000)
        page.wait_for_timeout(500)
        page.screenshot(path=str(out / f"report-{code}.png"), full_page=True)
        context.close()


@pytest.mark.parametrize(("code", "layout"), [("en", "%Y-%m-%d %H:%M:%S UTC"), ("zh-CN", "%Y/%m/%d %H:%M:%S UTC")])
def test_dates_are_unambiguous_utc_in_each_language(live_server: Any, browser: Any, code: str, layout: str) -> None:
    """English reads year-month-day as ISO 8601 does (not 12/05/2026); Chinese, year/month/day."""
    from datetime import UTC, datetime

    run = live_server.sdk_run(project=PROJECT, name="dated")
    run.log({"train/loss": 1.0}, step=1)
    assert run.flush(timeout=30)
    started = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}", timeout=10).json()["started_at"]
    context = browser.new_context(locale=code)
    try:
        page = context.new_page()
        open_run(page, live_server, run.id)
        page.wait_for_function("document.getElementById('fact-started').textContent !== ''")
        assert page.text_content("#fact-started") == datetime.fromtimestamp(started, UTC).strftime(layout)
        shape = re.sub(r"%[mdHMS]", r"\\d{2}", re.escape(layout).replace("%Y", r"\d{4}"))  # the timeline's times
        page.wait_for_selector("#timeline .tl-time")
        times = page.eval_on_selector_all("#timeline .tl-time", "els => els.map((e) => e.textContent)")
        assert times and all(re.fullmatch(shape, t) for t in times), times
    finally:
        context.close()
