"""The truth soak: a real `runcast train` (a loss spike with its note, a data-mix change,
checkpoints with retention, a crash, a resume in a new segment) watched by three pages
without reload -- one opened before the first step, one opened mid-run at phone width (its
budget of points is small: raw points give way to buckets, then to wider buckets, live),
one zoomed on a range (zoomed again later, then reset). At three moments mid-run and after
the finish, every page's store and every Plotly trace equal ``GET /metrics`` for the same
query, for every metric.

At a moment the trainer is paused (SIGSTOP) so that the comparison is exact rather than
"all but the last few seconds"; it resumes (SIGCONT) afterwards. Runs in the embedded
default and in production mode (PostgreSQL, Redis, a Celery worker).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from . import hung
from .truth import assert_page_tells_the_truth

pytestmark = pytest.mark.slow

STEPS = 1200
CRASH_AT = 600
RESUME_FROM = 500
TRAIN = [
    "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "2",
    "--data-limit", "20", "--max-steps", str(STEPS), "--warmup-steps", "10",
    "--eval-interval", "50", "--eval-iters", "1",
    "--ckpt-interval", "100", "--keep-last", "2", "--keep-best", "1",
    "--inject-spike-at", "150", "--mix", "0:code=0.7,prose=0.3;300:code=0.4,prose=0.6",
    "--project", "soak", "--name", "soak",
]


class GateProxy:
    """An HTTP proxy in front of the API that stores the first ``run_started`` at once and
    holds every event after it until ``release()``: the run exists with no step yet, long
    enough to open a page on it. Everything else is forwarded as it comes."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.run_id: str | None = None
        self.started = threading.Event()
        self.released = threading.Event()
        self.client = httpx.Client(timeout=30)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, content = proxy.forward(self.path, self.headers, body)
                self.send_response(status)
                for name in ("Content-Type", "Retry-After"):
                    if headers.get(name):
                        self.send_header(name, headers[name])
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def post(self, path: str, headers: Any, body: bytes) -> tuple[int, Any, bytes]:
        keep = {k: v for k, v in headers.items() if k.lower() in ("authorization", "content-type", "content-encoding")}
        r = self.client.post(self.target + path, content=body, headers=keep)
        return r.status_code, r.headers, r.content

    def forward(self, path: str, headers: Any, body: bytes) -> tuple[int, Any, bytes]:
        if self.released.is_set() or not path.endswith("/ingest"):
            return self.post(path, headers, body)
        batch = json.loads(body)
        events = batch["events"]
        first = next((i for i, e in enumerate(events) if e["type"] == "run_started"), None)
        if first is not None and self.run_id is None:
            head = events[: first + 1]
            status, _, content = self.post(path, headers, json.dumps({**batch, "events": head}).encode())
            assert status == 202, content
            self.run_id = events[first]["run"]
            self.started.set()
            events = events[first + 1 :]
        self.released.wait(timeout=8)  # under the SDK's 10 s request timeout
        if not events:
            return 202, {"Content-Type": "application/json"}, b'{"accepted": 0}'
        return self.post(path, headers, json.dumps({**batch, "events": events}).encode())

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.client.close()


class Trainer:
    """`runcast train` in its own process, output in a file."""

    def __init__(self, tmp: Path, server: str, token: str, *extra: str) -> None:
        self.log = tmp / f"train-{int(time.monotonic() * 1000)}.log"
        args = [sys.executable, "-m", "runcast.cli.main", "train", "--out-dir", str(tmp / "out"),
                "--server", server, "--token", token, *extra]
        env = {**os.environ, "RUNCAST_SPOOL_DIR": str(tmp / "spool"), "OMP_NUM_THREADS": "1"}
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)

    def output(self) -> str:
        return self.log.read_text()

    def wait(self, timeout: float = 240) -> int:
        return self.proc.wait(timeout=timeout)

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def go_on(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=30)


def summary(base: str, run: str) -> dict[str, Any]:
    return httpx.get(f"{base}/api/v1/runs/{run}", timeout=30).json()


def wait_step(base: str, run: str, step: int, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = summary(base, run)
        if (s["last_step"] or 0) >= step:
            return s
        time.sleep(0.1)
    raise AssertionError(f"run did not reach step {step}: {summary(base, run)['last_step']}")


def new_page(browser: Any, width: int, height: int) -> tuple[Any, Any]:
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    hung.watch(page)  # a page that stops answering says where its script is (truth.answering)
    page.errors = []
    page.console = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: page.console.append(f"{m.type}: {m.text}"))
    return context, page


def zoom(page: Any, steps: list[int]) -> None:
    """Zoom the loss chart as a drag does (every chart follows)."""
    page.evaluate("r => Plotly.relayout(document.getElementById('chart-main'), {'xaxis.range': r})", steps)
    page.wait_for_function(f"location.search.includes('start={steps[0]}')")


@pytest.fixture(params=["embedded", pytest.param("production", marks=pytest.mark.services)])
def api(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(base URL, token of project "soak") of a real server in either wiring."""
    if request.param == "embedded":
        server = request.getfixturevalue("live_server")
        yield server.url, server.token("soak")
    else:
        stack = request.getfixturevalue("stack")
        stack.start_worker()
        stack.start_api()
        yield stack.api_url, stack.token("soak")


def test_three_pages_equal_the_api_through_a_crash_and_a_resume(api, browser, tmp_path):
    base, token = api
    proxy = GateProxy(base)
    contexts: list[Any] = []
    trainers: list[Trainer] = []
    try:
        first = Trainer(tmp_path, proxy.url, token, *TRAIN, "--crash-at", str(CRASH_AT))
        trainers.append(first)
        assert proxy.started.wait(120), first.output()
        run = proxy.run_id
        assert summary(base, run)["last_step"] is None  # stored, and no step yet

        # Page A: opened before the first step; everything it shows comes from the stream.
        ctx, before = new_page(browser, 1280, 2600)
        contexts.append(ctx)
        before.goto(f"{base}/runs/{run}")
        before.wait_for_function("window.__runcast && window.__runcast.stream && window.__runcast.stream.open",
                                 timeout=20000)
        proxy.release()

        wait_step(base, run, 250)
        # Page B: opened mid-run, at phone width (one column: every panel in view).
        ctx, mid = new_page(browser, 390, 5200)
        contexts.append(ctx)
        mid.goto(f"{base}/runs/{run}")
        # Page C: zoomed on a range that the run is still filling.
        ctx, zoomed = new_page(browser, 1280, 2600)
        contexts.append(ctx)
        zoomed.goto(f"{base}/runs/{run}?start=150&end=700")
        pages = {"opened before the first step": before, "opened mid-run": mid, "zoomed": zoomed}

        def check(moment: str) -> None:
            keys = summary(base, run)["keys"]
            for label, page in pages.items():
                n = assert_page_tells_the_truth(page, base, run, keys, f"{moment}, page {label}")
                assert n > 0
                assert page.errors == [], (label, page.errors)

        wait_step(base, run, 400)
        first.pause()
        try:
            check("mid-run at step 400+")
        finally:
            first.go_on()

        assert first.wait() == 1, first.output()  # --crash-at: exits uncleanly, not finished
        zoom(zoomed, [350, 1100])
        check("after the crash, zoomed again")

        second = Trainer(tmp_path, base, token, "--resume", str(tmp_path / "out" / f"ckpt_{RESUME_FROM:07d}.pt"))
        trainers.append(second)
        wait_step(base, run, 900)
        second.pause()
        try:
            assert len(summary(base, run)["segments"]) == 2
            check("resumed, at step 900+")
        finally:
            second.go_on()

        assert second.wait() == 0, second.output()
        done = summary(base, run)
        assert done["status"] == "finished" and done["last_step"] == STEPS
        check("after the finish")
        zoomed.keyboard.press("Escape")  # back to the whole run
        zoomed.wait_for_function("!location.search.includes('start=')")
        check("after the finish, zoom reset")
        for label, page in pages.items():
            page.wait_for_function("document.getElementById('run-status').textContent === 'finished'", timeout=10000)
            state = page.get_attribute("#live-state", "data-state")
            assert state != "live" and "live" not in page.text_content("#live-state"), label
    finally:
        for t in trainers:
            t.stop()
        for ctx in contexts:
            ctx.close()
        proxy.close()
