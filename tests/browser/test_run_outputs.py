"""The run page's evaluations, samples and media panels (docs/dashboard.md) in headless Chromium
against a real server fed by the SDK or by wire batches: what the page shows equals what the
API holds, live without reload; run data renders as text only; only the thumbnails on screen
are asked for; a withheld kind is named; the word diff; the heat map's value labels whole.

``OUTPUTS_SHOTS=dir`` keeps the screenshots (else they go to the test's temp dir).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import runcast
from runcast.wire import events as ev

from .conftest import open_run

HOSTILE = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(2)</script>"


def shots_dir(tmp_path: Path) -> Path:
    out = Path(os.environ.get("OUTPUTS_SHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def console_errors(page: Any) -> list[str]:
    """The page's console errors (an anonymous page asks nothing that fails: not even GET /session)."""
    errors: list[str] = []

    def keep(msg: Any) -> None:
        if msg.type == "error":
            errors.append(f"{msg.text} ({msg.location.get('url')})")

    page.on("console", keep)
    return errors


def api(server: Any, path: str, **params: Any) -> Any:
    r = httpx.get(f"{server.url}/api/v1{path}", params=params, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def format_value(v: float) -> str:
    """util.js formatValue for the plain values these tests log (five significant digits)."""
    return f"{float(f'{v:.5g}'):g}"


def show(page: Any, card: str) -> None:
    """Scroll a card into view: panels read what they show once in view."""
    page.locator(card).scroll_into_view_if_needed()


# What the samples panel shows of its output: the text without the removed words (<del>), and
# without the added ones (<ins>): the sample and the one before it.
SHOWN = """(mode) => {
  const box = document.querySelector('#sample-view .sample-text');
  return [...box.childNodes].filter(n => n.nodeName !== (mode === 'now' ? 'DEL' : 'INS')).map(n => n.textContent).join('');
}"""


class Wire:
    """A run sent as wire batches by hand (one segment), images uploaded through the blob route."""

    def __init__(self, server: Any, name: str, **started: Any) -> None:
        self.http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token('demo')}"})
        self.run, self.segment, self.seq = ev.new_id(), ev.new_id(), 0
        self.send([self.event("run_started", project="demo", name=name, **started)])

    def event(self, type_: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        return ev.encode_event({"v": 1, "type": type_, "run": self.run, "segment": self.segment, "seq": self.seq - 1,
                                "ts": time.time(), **fields})

    def send(self, events: list[dict[str, Any]]) -> None:
        for i in range(0, len(events), 1000):
            r = self.http.post("/api/v1/ingest", json={"v": 1, "events": events[i:i + 1000]})
            assert r.status_code == 202, r.text

    def image(self, step: int, shade: int) -> dict[str, Any]:
        import io

        from PIL import Image

        out = io.BytesIO()
        Image.new("RGB", (60, 40), (shade % 256, 80, 160)).save(out, format="PNG")
        data = out.getvalue()
        sha = hashlib.sha256(data).hexdigest()
        r = self.http.put(f"/api/v1/runs/{self.run}/blobs/{sha}", content=data, headers={"Content-Type": "image/png"})
        assert r.status_code in (200, 201), r.text
        return self.event("media", step=step, key="gen/grid", kind="image", blob=sha, content_type="image/png",
                          width=60, height=40, size=len(data), caption=f"shade {shade}")


def test_live_outputs_appear_without_reload_and_equal_the_api(live_server, page, tmp_path):
    errors = console_errors(page)
    run = live_server.sdk_run(name="outputs live")
    for step in range(1, 21):
        run.log({"train/loss": 3.0 / step}, step=step)
    assert run.flush(timeout=20)
    open_run(page, live_server, run.id)
    page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
    page.evaluate("window.__sameDocument = true")
    for card in ("#evals-card", "#samples-card", "#media-card"):
        assert page.is_hidden(card)  # nothing yet: no empty panels

    # A checkpoint at step 20, logged while the page is open, with its samples, scores and media.
    ckpt = live_server.data_dir / "storage" / "demo" / "live" / "step20.pt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"weights")
    run.checkpoint(ckpt, step=20)
    run.log_samples([{"prompt": "The capital of France is", "output": " Paris, on the Seine.",
                      "reference": " Paris", "scores": {"exact": 1.0}, "settings": {"temperature": 0.7}},
                     {"prompt_id": "story", "prompt": "Once upon a time", "output": " there was a tiny model."}], step=20)
    run.log_eval({"hellaswag": {"acc": 0.31, "acc_norm": 0.35, "acc_stderr": 0.012}, "arc_easy": {"acc": 0.52}},
                 step=20, suite="lm-eval-harness", checkpoint=20, n=100)
    grid = np.arange(40 * 60 * 3, dtype=np.uint32).reshape(40, 60, 3).astype(np.uint8)
    run.log({"gen/grid": runcast.Image(grid, caption="step 20"),
             "val/worst": runcast.Table(columns=["prompt", "loss"], rows=[["a", 3.5], ["b", 2.25]]),
             "weights/w0": runcast.Histogram(np.linspace(-1, 1, 1000), bins=8)}, step=20)
    assert run.flush(timeout=20)

    # Evaluations: the table's cells are the API's scores; the checkpoint lists them.
    page.wait_for_selector("#evals-card:not([hidden]) table.evals tbody tr", timeout=15000)
    show(page, "#evals-card")
    evals = api(live_server, f"/runs/{run.id}/evals")["evals"]
    assert {e["task"] for e in evals} == {"hellaswag", "arc_easy"}
    rows = page.eval_on_selector_all("table.evals tbody tr", """rows => rows.map(r =>
        [...r.cells].filter((c, i) => i !== 2).map(c => c.textContent))""")  # the third: the sparkline
    assert rows == [["arc_easy", "acc", "0.52"], ["hellaswag", "acc", "0.31"], ["hellaswag", "acc_norm", "0.35"]]
    assert page.get_attribute("table.evals tr[data-task='hellaswag'] svg", "aria-label") == "hellaswag acc: 0.31"
    assert page.eval_on_selector_all("table.evals thead th", "t => t.map(h => h.textContent)")[3] == "checkpoint20"
    card_evals = api(live_server, f"/runs/{run.id}/checkpoints")["checkpoints"][0]["evals"]
    expected = " · ".join(f"{e['task']} acc {format_value(e['metrics']['acc'])}" for e in card_evals)
    page.wait_for_function("(t) => [...document.querySelectorAll('#checkpoints .ck-evals')].some(p => p.textContent === t)",
                           arg="Scores: " + expected, timeout=15000)

    # Samples: the first prompt at its only step, as the API holds it.
    page.wait_for_selector("#samples-card:not([hidden])", timeout=15000)
    show(page, "#samples-card")
    page.wait_for_selector("#sample-view .sample-text", timeout=15000)
    [first] = api(live_server, f"/runs/{run.id}/samples", key="samples",
                  prompt=page.eval_on_selector("#samples-prompts", "s => s.value"))["samples"]
    assert page.evaluate(SHOWN, "now") == first["output"] == " Paris, on the Seine."
    assert "exact 1" in page.text_content("#sample-view .sample-scores")
    assert page.text_content("#sample-view .sample-settings") == "Settings temperature 0.7"
    assert page.text_content("#sample-view .sample-reference .sample-text") == " Paris"
    assert page.eval_on_selector_all("#samples-prompts option", "o => o.map(x => x.textContent)") == [
        "The capital of France is", "story · Once upon a time"]

    # Media: the image strip's thumbnail is the API's image, resized by the server; the table
    # and the heat map are there.
    page.wait_for_selector("#media-card:not([hidden])", timeout=15000)
    show(page, "#media-card")
    page.wait_for_function("() => { const i = document.querySelector('.thumb img'); return i && i.complete && i.naturalWidth > 0; }",
                           timeout=15000)
    [image] = api(live_server, f"/runs/{run.id}/media", key="gen/grid")["media"]
    src = page.get_attribute(".thumb img", "src")
    assert src.startswith(image["image_url"] + "?w=")
    page.click(".thumb button")
    page.wait_for_function("() => document.querySelector('#media-lightbox img').naturalWidth > 0")
    assert page.get_attribute("#media-lightbox img", "src") == image["image_url"]
    whole = page.evaluate("async (u) => Array.from(new Uint8Array(await (await fetch(u)).arrayBuffer()))", image["image_url"])
    assert hashlib.sha256(bytes(whole)).hexdigest() == image["blob"]
    page.keyboard.press("Escape")
    [table] = api(live_server, f"/runs/{run.id}/media", key="val/worst")["media"]
    cells = page.eval_on_selector_all(".media-key[data-key='val/worst'] tbody tr",
                                      "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    assert cells == [[str(c) for c in row] for row in table["rows"]] == [["a", "3.5"], ["b", "2.25"]]
    page.wait_for_function("() => document.querySelector('.media-key[data-key=\"weights/w0\"] canvas').width > 0")
    assert "histograms of 1 step," in page.get_attribute(".media-key[data-key='weights/w0'] canvas", "aria-label")

    # The next step, live: the view follows it and marks what changed since step 20; the strip
    # grows, the table and the scores follow.
    run.log_samples([{"prompt": "The capital of France is", "output": " Paris, on the river Seine."}], step=30)
    run.log_eval({"hellaswag": {"acc": 0.36}}, step=30, suite="lm-eval-harness")
    run.log({"gen/grid": runcast.Image(255 - grid, caption="step 30"),
             "val/worst": runcast.Table(columns=["prompt", "loss"], rows=[["c", 1.5]])}, step=30)
    assert run.flush(timeout=20)
    page.wait_for_function("document.getElementById('samples-step-label').textContent.startsWith('step 30')", timeout=15000)
    samples = api(live_server, f"/runs/{run.id}/samples", key="samples", prompt=first["prompt_id"])["samples"]
    assert [s["step"] for s in samples] == [20, 30]
    assert page.evaluate(SHOWN, "now") == samples[1]["output"]
    assert page.evaluate(SHOWN, "before") == samples[0]["output"]
    assert page.eval_on_selector_all("#sample-view ins", "n => n.map(x => x.textContent)") == ["river "]
    page.wait_for_function("document.querySelectorAll('.thumb img').length === 2", timeout=15000)
    page.wait_for_function("document.querySelector(\".media-key[data-key='val/worst'] tbody td\").textContent === 'c'",
                           timeout=15000)
    page.wait_for_function("document.querySelectorAll('table.evals thead th').length === 5", timeout=15000)
    assert page.eval_on_selector("table.evals tbody tr[data-task='hellaswag']",
                                 "r => [...r.cells].slice(3).map(c => c.textContent)") == ["0.31", "0.36"]

    assert page.evaluate("window.__sameDocument") is True  # never reloaded
    show(page, "#evals-card")
    page.screenshot(path=str(shots_dir(tmp_path) / "outputs-live.png"), full_page=True)
    assert page.errors == [] and page.dialogs == [] and errors == []


def test_hostile_outputs_render_as_text(live_server, page, tmp_path):
    errors = console_errors(page)
    run = live_server.sdk_run(name="hostile outputs")
    run.log({"train/loss": 1.0}, step=1)
    key = f"samples/{HOSTILE}"
    run.log_samples([{"prompt_id": HOSTILE, "prompt": SCRIPT + HOSTILE, "output": HOSTILE + SCRIPT,
                      "reference": SCRIPT, "scores": {HOSTILE: 1.0}, "settings": {SCRIPT: HOSTILE}}], step=1, key=key)
    run.log_eval({HOSTILE: {"acc": 0.5}}, step=1, suite=SCRIPT)
    run.log({f"img/{HOSTILE}": runcast.Image(np.zeros((8, 8), dtype=np.uint8), caption=HOSTILE + SCRIPT),
             f"tab/{HOSTILE}": runcast.Table(columns=[HOSTILE, SCRIPT], rows=[[SCRIPT, HOSTILE]])}, step=1)
    assert run.flush(timeout=20)

    open_run(page, live_server, run.id)
    for card in ("#evals-card", "#samples-card", "#media-card"):
        page.wait_for_selector(card + ":not([hidden])", timeout=15000)
        show(page, card)
    page.wait_for_selector("#sample-view .sample-text")
    page.wait_for_selector(".thumb img[src]")
    page.wait_for_selector(".media-table td")
    assert page.text_content("#sample-view .sample-text") == HOSTILE + SCRIPT
    assert page.text_content("#sample-prompt .sample-prompt-text") == SCRIPT + HOSTILE
    assert page.eval_on_selector("#samples-prompts", "s => s.options[0].textContent") == f"{HOSTILE} · {SCRIPT}{HOSTILE}"
    assert page.eval_on_selector("#samples-key", "s => s.options[0].textContent") == key
    assert HOSTILE in page.text_content("#sample-view .sample-scores")
    assert page.text_content("#sample-view .sample-settings") == f"Settings {SCRIPT} {HOSTILE}"
    assert page.text_content("table.evals tbody th") == HOSTILE
    assert page.text_content("#evals .evals-suite") == "Suite " + SCRIPT
    assert page.get_attribute(".thumb button", "title") == HOSTILE + SCRIPT
    assert page.text_content(".thumb-caption") == HOSTILE + SCRIPT
    assert page.eval_on_selector_all(".media-table th, .media-table td", "c => c.map(x => x.textContent)") == [
        HOSTILE, SCRIPT, SCRIPT, HOSTILE]
    assert f"img/{HOSTILE}" in page.text_content("#media")
    # Nothing of it became markup: the only images are the thumbnails, from the image route.
    srcs = page.eval_on_selector_all("#run img", "n => n.map(i => i.getAttribute('src'))")
    assert len(srcs) == 1 and srcs[0].startswith(f"/api/v1/runs/{run.id}/media/")
    assert page.eval_on_selector_all("#run script", "n => n.length") == 0
    page.click(".thumb button")
    assert page.text_content("#media-lightbox .lightbox-caption").endswith(HOSTILE + SCRIPT)
    page.keyboard.press("Escape")
    page.screenshot(path=str(shots_dir(tmp_path) / "outputs-hostile.png"), full_page=True)
    assert page.errors == [] and page.dialogs == [] and errors == []


def test_samples_search_steps_and_whole_output(live_server, page, tmp_path):
    errors = console_errors(page)
    wire = Wire(live_server, "forty prompts")
    long_tail = " word" * 900  # past the list's 2,000 characters
    long_output = " answer 7 at 300" + long_tail
    events = []
    for step in (100, 200, 300):
        events.append(wire.event("metrics", step=step, values={"train/loss": 1.0}))
        for p in range(40):
            out = f" answer {p} at {step}" + (long_tail if p == 7 and step == 300 else "")
            events.append(wire.event("sample", step=step, key="samples", prompt_id=f"p{p:02d}", prompt=f"Question {p}?",
                                     output=out, scores={"len": len(out)}))
    wire.send(events)

    open_run(page, live_server, wire.run)
    page.wait_for_selector("#samples-card:not([hidden])", timeout=15000)
    show(page, "#samples-card")
    page.wait_for_selector("#sample-view .sample-text")
    assert page.text_content("#samples-count") == "40 prompts"
    assert page.is_hidden("#samples-key")  # one key: no selector
    page.fill("#samples-search", "question 1")
    visible = page.eval_on_selector_all("#samples-prompts option", "o => o.filter(x => !x.hidden).map(x => x.value)")
    assert visible == ["p01"] + [f"p{p}" for p in range(10, 20)]
    assert page.text_content("#samples-count") == "11 of 40 prompts"
    page.select_option("#samples-prompts", "p07")
    page.wait_for_function("document.getElementById('samples-step-label').textContent === 'step 300 (3 of 3)'")
    samples = api(live_server, f"/runs/{wire.run}/samples", key="samples", prompt="p07")["samples"]
    # Clipped by the list, then read whole on demand.
    assert page.evaluate(SHOWN, "now") == samples[2]["output"] and len(samples[2]["output"]) == 2000
    assert samples[2]["output_chars"] == len(long_output) == 4516
    assert "Showing 2,000 of 4,516 characters." in page.text_content(".sample-clipped")
    page.click(".sample-whole")
    whole = api(live_server, f"/runs/{wire.run}/samples/{samples[2]['id']}")["output"]
    page.wait_for_function("(n) => document.querySelector('#sample-view .sample-text').textContent.length >= n",
                           arg=len(whole))
    assert page.evaluate(SHOWN, "now") == whole == long_output
    # The slider and the list of every step.
    page.eval_on_selector("#samples-step", "s => { s.value = '0'; s.dispatchEvent(new Event('input', {bubbles: true})); }")
    page.wait_for_function("document.getElementById('samples-step-label').textContent === 'step 100 (1 of 3)'")
    assert page.text_content("#sample-view .sample-text") == samples[0]["output"]
    assert "the first sample of this prompt" in page.text_content("#sample-view .sample-meta")
    page.click(".sample-steps-box summary")
    page.wait_for_selector("#sample-steps li")  # built on the fold-out's toggle event
    assert page.eval_on_selector_all("#sample-steps li button", "b => b.map(x => x.textContent)") == [
        "step 100", "step 200", "step 300"]
    page.click("#sample-steps li:nth-child(2) button")
    assert page.evaluate(SHOWN, "now") == " answer 7 at 200"
    assert page.eval_on_selector_all("#sample-view del", "n => n.map(x => x.textContent)") == ["100"]
    assert page.eval_on_selector_all("#sample-view ins", "n => n.map(x => x.textContent)") == ["200"]
    page.locator("#samples-card").screenshot(path=str(shots_dir(tmp_path) / "outputs-samples.png"))
    assert page.errors == [] and page.dialogs == [] and errors == []


def test_image_strip_asks_only_for_the_thumbnails_on_screen(live_server, page, tmp_path):
    wire = Wire(live_server, "three hundred images")
    events = []
    for i in range(300):
        events += [wire.event("metrics", step=i, values={"train/loss": 1.0}), wire.image(i, i)]
    wire.send(events)
    asked: list[str] = []
    page.on("request", lambda r: "/media/" in r.url and "/image" in r.url and asked.append(r.url))

    open_run(page, live_server, wire.run)
    page.wait_for_selector("#media-card:not([hidden])", timeout=15000)
    show(page, "#media-card")
    page.wait_for_function("document.querySelectorAll('.thumb img[src]').length > 0", timeout=15000)
    page.wait_for_timeout(300)
    on_screen = page.eval_on_selector_all(".thumb img", """imgs => { const strip = document.querySelector('.strip').getBoundingClientRect();
        return imgs.filter(i => { const r = i.getBoundingClientRect();
          return r.right > strip.left && r.left < strip.right && r.bottom > 0 && r.top < innerHeight; }).length; }""")
    thumbs = page.eval_on_selector_all(".thumb img", "n => n.length")
    assert thumbs == 100 and 0 < on_screen < 20
    assert len(asked) == on_screen, asked
    assert all("?w=" in u for u in asked)
    # The newest is shown first and highlighted; the slider jumps to an early step.
    assert page.text_content(".thumb[aria-current] .thumb-step") == "step 299"
    page.eval_on_selector(".strip-nav input[type=range]",
                          "s => { s.value = '10'; s.dispatchEvent(new Event('input', {bubbles: true})); }")
    page.wait_for_function("document.querySelector('.thumb[aria-current] .thumb-step').textContent === 'step 10'", timeout=10000)
    page.wait_for_timeout(300)
    shown = page.eval_on_selector_all(".thumb img[src]", "n => n.map(i => i.getAttribute('src'))")
    assert len(asked) < 3 * on_screen and all(any(u.endswith(s) for u in asked) for s in shown)
    page.locator("#media-card").screenshot(path=str(shots_dir(tmp_path) / "outputs-strip.png"))
    assert page.errors == [] and page.dialogs == []


def test_withheld_outputs_are_named(live_server, page):
    run = live_server.sdk_run(name="outputs withheld", policy={"samples": "hidden", "evals": "hidden", "media": "hidden"})
    run.log({"train/loss": 1.0}, step=1)
    run.log_samples([{"prompt": "p", "output": "secret words"}], step=1)
    run.log_eval({"task": {"acc": 0.9}}, step=1)
    run.log({"img": runcast.Image(np.zeros((4, 4), dtype=np.uint8))}, step=1)
    assert run.flush(timeout=20)
    open_run(page, live_server, run.id)
    for card, text in (("#evals", "Evaluations withheld by the team."), ("#samples", "Samples withheld by the team."),
                       ("#media", "Media withheld by the team.")):
        page.wait_for_selector(card + "-card:not([hidden])", timeout=15000)
        assert page.text_content(card) == text
    items = page.eval_on_selector_all("#run-withheld li", "nodes => nodes.map(n => n.textContent)")
    assert items == ["samples withheld by the team", "evaluations withheld by the team", "media withheld by the team"]
    assert "secret words" not in page.text_content("main")
    assert page.errors == [] and page.dialogs == []


WORD_DIFF = """async () => {
  const { wordDiff } = await import('/js/run/worddiff.js');
  const examples = [
    ['the cat sat', 'the dog sat'], ['a b c', 'x y z'], ['one two three four', 'one 2 three 4'], ['', 'new'], ['old', ''],
    ['Paris, and its river', 'Paris and the river Seine.'],
  ].map(([a, b]) => wordDiff(a, b).map(r => r.op + r.text));
  // Random texts: the kept and removed runs give the text before, the kept and added ones the text after.
  let seed = 7;
  const rand = (n) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  const words = ['a', 'b', 'cc', 'dd', ' ', '  ', ',', '.', '\\n', 'é', '漢'];
  const text = () => Array.from({length: rand(40)}, () => words[rand(words.length)]).join('');
  let bad = 0;
  for (let k = 0; k < 300; k++) {
    const a = text(), b = text(), runs = wordDiff(a, b);
    const join = (skip) => runs.filter(r => r.op !== skip).map(r => r.text).join('');
    if (join('+') !== a || join('-') !== b) bad++;
    if (runs.some((r, i) => i && r.op === runs[i - 1].op)) bad++;
  }
  return { examples, bad, capped: wordDiff('a b c', 'x y z', 2) };
}"""


def test_word_diff(live_server, page):
    page.goto(live_server.url + "/")
    got = page.evaluate(WORD_DIFF)
    assert got["examples"] == [
        ["=the ", "-cat", "+dog", "= sat"],
        ["-a b c", "+x y z"],
        ["=one ", "-two", "+2", "= three ", "-four", "+4"],
        ["+new"],
        ["-old"],
        ["=Paris", "-,", "= and ", "-its", "+the", "= river", "+ Seine."],
    ]
    assert got["bad"] == 0 and got["capped"] is None


# The leftmost CSS pixel column of a canvas with any ink in it (the value labels are drawn there).
FIRST_INK = """(canvas) => {
  const ctx = canvas.getContext('2d');
  const scale = canvas.width / canvas.clientWidth;
  const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  for (let x = 0; x < canvas.width; x++)
    for (let y = 0; y < canvas.height; y++) if (data[(y * canvas.width + x) * 4 + 3] > 0) return x / scale;
  return null;
}"""


def test_the_heat_map_s_value_labels_fit_small_and_far_values_and_a_range_far_from_zero_draws(
        live_server: Any, browser: Any) -> None:
    """A small gradient's labels ("-2.000e-4") are wider than the default margin, and a histogram of one
    bin near 1e17 has a range its tick loop could not step through (the tab froze): each heat map draws,
    every label whole inside the canvas."""
    run = live_server.sdk_run(name="labels")
    rng = np.random.default_rng(0)
    for step in (10, 20):
        run.log({"loss": 3.0 - step / 100, "grads/small": runcast.Histogram(rng.normal(0, 1e-4, 1000), bins=16),
                 "grads/far": runcast.Histogram([1e17, 1e17 + 16], bins=1)}, step=step)
    run.flush()
    page = browser.new_page(viewport={"width": 1280, "height": 2000})
    try:
        open_run(page, live_server, run.id)
        show(page, "#media-card")
        for key in ("grads/small", "grads/far"):
            canvas = f".media-key[data-key='{key}'] canvas"
            page.wait_for_function(f"() => {{ const c = document.querySelector(\"{canvas}\"); return c && c.width > 0; }}",
                                   timeout=15000)
            first = page.eval_on_selector(canvas, FIRST_INK)
            assert first is not None and first >= 2, (key, first)  # no label cut at the canvas's edge
    finally:
        page.close()
