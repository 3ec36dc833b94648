"""The run page's samples and media panels on big runs (issue 25), in headless Chromium.

    .venv/bin/python bench/outputs_page.py --data-dir /tmp/rc-outputs --repeat 5

Fills an embedded ``runcast serve`` (a temp data dir, or ``--data-dir DIR`` to keep and reuse
it) over HTTP, as a trainer would (``POST /api/v1/ingest``, images through ``PUT .../blobs``):

* run ``samples``: ``--prompts`` prompts x ``--steps`` steps of samples (outputs of 300-700
  characters that change a few words from one step to the next), and a loss curve;
* run ``images``: ``--images`` distinct PNG images (256 x 192: the page asks for thumbnails
  of 128 pixels, which the server makes once and keeps) under one key, one per step.

Then, in headless Chromium (the page warm: a first load, then a reload; every number below is
of the reload):

(a) ``open``: the samples panel scrolled into view -> its first prompt's outputs drawn (the
    page's ``runcast-samples-open``/``runcast-samples-shown`` performance marks), and
    navigation start -> drawn with the panel in view from the start (a window 2,000 px tall);
    ``switch``: another prompt picked in the list -> its newest output and the diff to the step
    before drawn (``runcast-prompt-pick``/``runcast-samples-shown``), and -> every step of it
    read (``runcast-samples-complete``: the slider and the list usable), for ``--switches``
    prompts never shown before (nothing cached) per repeat;
(b) the images run's media panel scrolled into view -> the first thumbnail drawn (complete
    and decoded), in three states: the first time ever (the thumbnails the server keeps deleted
    first, a new browser context: the server makes them), a new browser context (empty cache),
    and a reload; and the image requests the page made (every ``/image`` resource timing)
    against the thumbnails inside the viewport.

Prints one table; targets: open <= 300 ms, switch <= 50 ms, first thumbnails <= 500 ms with
only the visible ones requested.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # services.py: the test suite's server helpers

import httpx  # noqa: E402
import services  # noqa: E402
from runcast.wire import events as ev  # noqa: E402

SAMPLES_RUN = "outputs-bench-samples"
IMAGES_RUN = "outputs-bench-images"
CHROMIUM = os.environ.get("RUNCAST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"]
WORDS = ["the", "model", "a", "of", "and", "to", "in", "is", "was", "that", "it", "for", "on", "with", "as", "at", "by", "from", "this", "be", "or", "are", "an", "which", "river", "city", "paris", "seine", "north", "light", "water", "stone", "bridge", "small", "large", "old", "new", "story", "king", "queen", "tiny", "gpt", "learned", "token", "train", "loss", "step", "night", "day", "once", "upon", "time", "there", "lived", "quick", "brown", "fox", "jumps"]


class Sender:
    """One run sent as wire batches (one segment, events numbered like the SDK's)."""

    def __init__(self, base: str, token: str, run: str, name: str) -> None:
        self.base, self.run, self.seq = base, run, 0
        self.http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120)
        self.segment = ev.new_id()
        self.send([self.event("run_started", project="bench", name=name, alerts={"enabled": False})])

    def event(self, type_: str, **fields: object) -> dict:
        out = {"v": 1, "type": type_, "run": self.run, "segment": self.segment, "seq": self.seq, "ts": time.time(), **fields}
        self.seq += 1
        return ev.encode_event(out)

    def send(self, events: list[dict]) -> None:
        for i in range(0, len(events), 1000):
            r = self.http.post("/api/v1/ingest", json={"v": 1, "events": events[i:i + 1000]})
            assert r.status_code == 202, r.text


def output_text(rng: random.Random, words: list[str], step: int) -> str:
    """A prompt's output at a step: its words, a few of them changed at each step."""
    for _ in range(3):
        words[rng.randrange(len(words))] = rng.choice(WORDS)
    return " " + " ".join(words) + "."


def fill(base: str, token: str, prompts: int, steps: int, images: int) -> None:
    began = time.perf_counter()
    run = Sender(base, token, SAMPLES_RUN, f"samples: {prompts} prompts x {steps} steps")
    rng = random.Random(25)
    texts = [[rng.choice(WORDS) for _ in range(rng.randrange(60, 130))] for _ in range(prompts)]
    every = 10
    for s in range(steps):
        step = s * every
        batch = [run.event("metrics", step=step, values={"train/loss": 4.0 / (1 + s / 50)})]
        for p in range(prompts):
            batch.append(run.event("sample", step=step, key="samples", prompt_id=f"prompt-{p:03d}",
                                   prompt=f"Prompt {p}: " + " ".join(WORDS[(p + i) % len(WORDS)] for i in range(12)),
                                   output=output_text(rng, texts[p], step), scores={"bleu": rng.random()}))
        run.send(batch)
        if (s + 1) % 100 == 0:
            print(f"  samples: {s + 1} of {steps} steps ({time.perf_counter() - began:.0f} s)", flush=True)
    run.send([run.event("finished", status="finished")])

    from PIL import Image

    run = Sender(base, token, IMAGES_RUN, f"images: {images}")
    batch = []
    gradient = Image.linear_gradient("L").resize((256, 192))
    for i in range(images):
        img = Image.merge("RGB", (gradient, Image.new("L", (256, 192), i % 256), Image.new("L", (256, 192), (i // 256) % 256)))
        img.putpixel((i % 256, (i // 256) % 192), (255, 255, 255))
        out = io.BytesIO()
        img.save(out, format="PNG")
        data = out.getvalue()
        sha = hashlib.sha256(data).hexdigest()
        r = run.http.put(f"/api/v1/runs/{IMAGES_RUN}/blobs/{sha}", content=data, headers={"Content-Type": "image/png"})
        assert r.status_code in (200, 201), r.text
        batch.append(run.event("metrics", step=i, values={"train/loss": 4.0 / (1 + i / 500)}))
        batch.append(run.event("media", step=i, key="samples/grid", kind="image", blob=sha, content_type="image/png",
                               width=256, height=192, size=len(data), caption=f"image {i}"))
        if len(batch) >= 1000:
            run.send(batch)
            batch = []
            print(f"  images: {i + 1} of {images} ({time.perf_counter() - began:.0f} s)", flush=True)
    run.send(batch + [run.event("finished", status="finished")])
    print(f"filled in {time.perf_counter() - began:.0f} s", flush=True)


def serve(data_dir: Path) -> tuple[services.Process, str, str]:
    env = {"RUNCAST_DATA_DIR": str(data_dir)}
    vendor = ROOT / "vendor" / "node_modules"
    if os.environ.get("RUNCAST_VENDOR_DIR") or vendor.is_dir():
        env["RUNCAST_VENDOR_DIR"] = os.environ.get("RUNCAST_VENDOR_DIR") or str(vendor)
    token_file = data_dir / "bench-token"
    if not token_file.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        token_file.write_text(services.create_token(env, "bench"))
    proc, base = services.start_api(env, data_dir / "serve.log", timeout=120)
    return proc, base, token_file.read_text()


# --- measuring -----------------------------------------------------------------------------------

LAST_MARK = "(name) => { const m = performance.getEntriesByName(name); return m.length ? m[m.length - 1].startTime : null; }"
MARKS = "(name) => performance.getEntriesByName(name).length"

FIRST_THUMB = """async () => {
  const t0 = performance.now();
  document.getElementById('media-card').scrollIntoView();
  for (;;) {
    await new Promise((ok) => requestAnimationFrame(ok));
    const img = [...document.querySelectorAll('.thumb img[src]')].find((i) => i.complete && i.naturalWidth > 0);
    if (img) return performance.now() - t0;
    if (performance.now() - t0 > 20000) return null;
  }
}"""

ON_SCREEN = """() => {
  const imgs = [...document.querySelectorAll('.thumb img')];
  const strip = document.querySelector('.strip').getBoundingClientRect();
  const visible = imgs.filter((i) => { const r = i.getBoundingClientRect();
    return r.right > strip.left && r.left < strip.right && r.bottom > 0 && r.top < innerHeight; });
  const asked = performance.getEntriesByType('resource').filter((r) => r.name.includes('/media/') && r.name.includes('/image'));
  return {thumbs: imgs.length, visible: visible.length, asked: asked.length,
          widths: [...new Set(asked.map((r) => new URL(r.name).searchParams.get('w')))],
          bytes: asked.reduce((n, r) => n + (r.transferSize || 0), 0)};
}"""


def wait_drawn(page) -> None:  # type: ignore[no-untyped-def]
    page.wait_for_function("window.__runcastDrawn !== undefined", timeout=60000)


def measure_samples(browser, base: str, repeat: int, switches: int) -> dict[str, list[float]]:  # type: ignore[no-untyped-def]
    out: dict[str, list[float]] = {"open": [], "nav": [], "switch": [], "complete": []}
    url = f"{base}/runs/{SAMPLES_RUN}"
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    page.goto(url)  # the first load fills the cache; every number is of a reload
    wait_drawn(page)
    rng = random.Random(7)
    for _ in range(repeat):
        page.reload()
        wait_drawn(page)
        page.wait_for_selector("#samples-card:not([hidden]) #samples-prompts option", timeout=60000)
        page.locator("#samples-card").scroll_into_view_if_needed()
        page.wait_for_function(f"({MARKS})('runcast-samples-shown') > 0", timeout=60000)
        out["open"].append(page.evaluate(LAST_MARK, "runcast-samples-shown") - page.evaluate(LAST_MARK, "runcast-samples-open"))
        options = page.eval_on_selector_all("#samples-prompts option", "o => o.map(x => x.value)")
        page.wait_for_function(f"({MARKS})('runcast-samples-complete') > 0", timeout=60000)
        for value in rng.sample(options[2:], switches):  # never shown before: nothing cached
            before = page.evaluate(MARKS, "runcast-samples-complete")
            page.select_option("#samples-prompts", value)
            page.wait_for_function(f"({MARKS})('runcast-samples-complete') > {before}", timeout=60000)
            pick = page.evaluate(LAST_MARK, "runcast-prompt-pick")
            out["switch"].append(page.evaluate(LAST_MARK, "runcast-samples-shown") - pick)
            out["complete"].append(page.evaluate(LAST_MARK, "runcast-samples-complete") - pick)
    ctx.close()
    # The card in view from the start (a tall window): navigation start -> the outputs drawn.
    ctx = browser.new_context(viewport={"width": 1400, "height": 2000})
    page = ctx.new_page()
    page.goto(url)
    wait_drawn(page)
    for _ in range(repeat):
        page.reload()
        page.wait_for_function(f"({MARKS})('runcast-samples-shown') > 0", timeout=60000)
        out["nav"].append(page.evaluate(LAST_MARK, "runcast-samples-shown"))
    ctx.close()
    return out


def first_thumb(page, url: str) -> tuple[float, dict, dict]:  # type: ignore[no-untyped-def]
    """Open (or reload) the images run, let it settle, scroll the media panel into view: the time
    to the first thumbnail drawn, and the image requests before and after."""
    if page.url == url:
        page.reload()
    else:
        page.goto(url)
    wait_drawn(page)
    page.wait_for_selector("#media-card:not([hidden])", timeout=60000)
    page.wait_for_timeout(300)  # settled: the panel below the fold has asked for no image
    before = page.evaluate(ON_SCREEN)
    first = page.evaluate(FIRST_THUMB)
    page.wait_for_timeout(500)
    return first, before, page.evaluate(ON_SCREEN)


def measure_images(browser, base: str, repeat: int, thumbs: Path) -> tuple[dict[str, list[float]], dict]:  # type: ignore[no-untyped-def]
    out: dict[str, list[float]] = {"made": [], "cold": [], "warm": [], "nav": []}
    seen = {}
    url = f"{base}/runs/{IMAGES_RUN}"
    for _ in range(repeat):
        shutil.rmtree(thumbs, ignore_errors=True)  # the server makes the thumbnails again
        for case in ("made", "cold"):
            ctx = browser.new_context(viewport={"width": 1400, "height": 900})
            first, before, after = first_thumb(ctx.new_page(), url)
            out[case].append(first)
            seen[case] = {"before_scroll": before["asked"], **after}
            ctx.close()
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    first_thumb(page, url)
    for _ in range(repeat):
        first, before, after = first_thumb(page, url)
        out["warm"].append(first)
        seen["warm"] = {"before_scroll": before["asked"], **after}
    ctx.close()
    ctx = browser.new_context(viewport={"width": 1400, "height": 2000})
    page = ctx.new_page()
    page.goto(url)
    wait_drawn(page)
    page.wait_for_function("document.querySelector('.thumb img[src]')", timeout=60000)
    for _ in range(repeat):
        page.reload()
        out["nav"].append(page.evaluate("""async () => { for (;;) { await new Promise((ok) => requestAnimationFrame(ok));
            if ([...document.querySelectorAll('.thumb img[src]')].some((i) => i.complete && i.naturalWidth > 0)) return performance.now(); } }"""))
    ctx.close()
    return out, seen


def med(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ms (max {max(values):.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, help="keep the server's data here and reuse it when it is filled")
    ap.add_argument("--prompts", type=int, default=200)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--images", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--switches", type=int, default=5, help="prompts switched to per repeat")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    tmp = None
    data_dir = args.data_dir
    if data_dir is None:
        tmp = tempfile.mkdtemp(prefix="runcast-outputs-page-")
        data_dir = Path(tmp)
    filled = (data_dir / "filled").exists()
    proc, base, token = serve(data_dir)
    load0 = os.getloadavg()
    try:
        if not filled:
            print(f"filling {args.prompts} prompts x {args.steps} steps and {args.images:,} images into {data_dir} ...",
                  flush=True)
            fill(base, token, args.prompts, args.steps, args.images)
            (data_dir / "filled").write_text(json.dumps(vars(args), default=str))
        load0 = os.getloadavg()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                samples = measure_samples(browser, base, args.repeat, args.switches)
                images, seen = measure_images(browser, base, args.repeat, data_dir / "storage" / "bench" / "blobs" / "thumbs")
            finally:
                browser.close()
    finally:
        proc.stop()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()
    print("| measure (warm: a reload) | median (max) | target |")
    print("|---|---|---|")
    print(f"| samples panel scrolled into view -> first prompt's outputs drawn | {med(samples['open'])} | <= 300 ms |")
    print(f"| navigation start -> outputs drawn, panel in view from the start (1400 x 2000) | {med(samples['nav'])} | |")
    print(f"| switch to a prompt not read before ({len(samples['switch'])} switches): its newest output and diff drawn | "
          f"{med(samples['switch'])} | <= 50 ms |")
    print(f"| the same switches: every step read (slider and list usable) | {med(samples['complete'])} | |")
    for case, words in (("made", "the first time (the server makes the thumbnails; empty browser cache)"),
                        ("cold", "empty browser cache (thumbnails kept by the server)"), ("warm", "a reload")):
        print(f"| media panel scrolled into view -> first thumbnail drawn, {words} | {med(images[case])} | <= 500 ms |")
    print(f"| navigation start -> first thumbnail drawn, panel in view from the start (1400 x 2000), a reload | "
          f"{med(images['nav'])} | |")
    print()
    for case, seen_ in seen.items():
        print(f"Images asked for ({case}, the last load): {seen_['before_scroll']} before the panel was scrolled into "
              f"view, {seen_['asked']} after ({seen_['bytes']:,} bytes), with {seen_['visible']} thumbnails on screen of "
              f"the {seen_['thumbs']} in the strip (widths asked: {seen_['widths']}), of the run's {args.images:,}.")
    print(f"Load average (1, 5, 15 min): {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at the start, "
          f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} at the end; {os.cpu_count()} CPUs "
          f"({platform.processor() or platform.machine()}), {platform.system()} {platform.release()}.")


if __name__ == "__main__":
    main()
