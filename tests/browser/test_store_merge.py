"""The page's store merges live points as the server does: into raw points by step and into
aligned buckets (min/max without NaN, ±Infinity kept, mean over finite values, last by the
highest step), also when points arrive out of step order, at any zoom.

The SDK logs each metric in increasing step order; another client may not, so the points
go in as raw batches through ``POST /api/v1/ingest``, as any HTTP client sends them."""

from __future__ import annotations

import math
import time
from typing import Any

import httpx
from runcast.wire import events as ev

from .conftest import open_run
from .truth import assert_page_tells_the_truth
from browser.reads import metrics_reads


class Client:
    """A run sent as wire batches by hand (one segment, events numbered like the SDK's)."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base
        self.headers = {"Authorization": f"Bearer {token}"}
        self.run = ev.new_id()
        self.segment = ev.new_id()
        self.seq = 0

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        raw = {"v": 1, "type": kind, "run": self.run, "segment": self.segment, "seq": self.seq, "ts": time.time(), **fields}
        self.seq += 1
        return ev.encode_event(raw)

    def send(self, events: list[dict[str, Any]]) -> None:
        for i in range(0, len(events), 500):
            r = httpx.post(f"{self.base}/api/v1/ingest", json={"v": 1, "events": events[i : i + 500]}, headers=self.headers, timeout=30)
            assert r.status_code == 202, r.text

    def log(self, steps: list[int]) -> None:
        self.send([self.event("metrics", step=s, values={"train/loss": value(s)}) for s in steps])


def value(step: int) -> float:
    if step % 50 == 0:
        return math.nan
    if step % 50 == 10:
        return math.inf
    if step % 50 == 20:
        return -math.inf
    return 2.0 + math.sin(step / 40) + (step % 7) / 10


def test_live_points_merge_into_raw_points_and_buckets_like_the_api(live_server, browser):
    run = Client(live_server.url, live_server.token("demo"))
    run.send([run.event("run_started", project="demo", name="merge", visibility="public")])
    run.log(list(range(1, 3001, 2)))  # odd steps first
    pages = {}
    reads: dict[str, list[str]] = {}
    contexts = []
    try:
        for label, width, query in (
            ("whole run, bucketed", 390, ""),
            ("zoomed, bucketed", 390, "?start=500&end=2500"),
            ("zoomed, raw", 1280, "?start=100&end=300"),
        ):
            context = browser.new_context(viewport={"width": width, "height": 900})
            contexts.append(context)
            page = context.new_page()
            page.errors = []
            page.on("pageerror", lambda e, page=page: page.errors.append(str(e)))
            open_run(page, live_server, run.run, query)
            page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
            pages[label] = page
            reads[label] = []
            page.on("request", lambda r, label=label: reads[label].extend(metrics_reads(r.url)))
        levels = {label: page.evaluate("window.__runcast.charts()[0].level") for label, page in pages.items()}
        assert levels["whole run, bucketed"] > 0 and levels["zoomed, bucketed"] > 0 and levels["zoomed, raw"] == 0

        # Now the even steps, out of order with what is drawn, NaN and ±Infinity among them,
        # then new steps past the end.
        run.log([*range(2998, 0, -2), *range(3001, 3301)])
        for label, page in pages.items():
            assert_page_tells_the_truth(page, live_server.url, run.run, ["train/loss"], label)
            assert reads[label] == [], label  # merged in the page, not read again
            assert page.errors == [], (label, page.errors)
    finally:
        for context in contexts:
            context.close()
