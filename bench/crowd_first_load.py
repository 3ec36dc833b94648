"""A crowd's first load of a live public run page through the shipped nginx site: bytes and requests.

Starts an embedded ``runcast serve`` (``RUNCAST_PUBLIC_FOLLOW=cache``) behind
deploy/nginx/runcast.conf.template (rendered as tests/topology/nginx.py does), logs ``--points``
steps of four keys with the SDK at once (the history), then goes on logging 10 steps a second (a
live run: the broadcast's edge and last pieces hold versions at that pace), and opens its page in headless
Chromium, each viewer in a fresh context (an empty browser cache), until the curve is drawn and
the page follows the run (its first edge read):

* ``first``: the first viewer (nginx's cache empty: everything from the API);
* ``next``: a viewer right after others (the first reads refreshed at the start of one of nginx's
  two-second periods, the edge read every 10 ms, as a crowd keeps them), the case of every
  viewer but the first;
* ``later``: a viewer 3 s after the last, no one in between (its reads' period has passed).

Prints, per viewer: requests, bytes on the wire (headers + encoded bodies, Chromium's
``transferSize``), how many nginx answered from its cache (HIT, UPDATING, STALE), and the bytes
by kind, against the budget of docs/performance.md ("Page weight for a crowd"). Usage::

    PYTHONPATH=$PWD/backend:$PWD/trainer:$PWD/tests .venv/bin/python bench/crowd_first_load.py --points 2000
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import services  # noqa: E402
from topology.nginx import Nginx  # noqa: E402
from topology.page_load import Fetched, first_load  # noqa: E402

KEYS = ("train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s")
BUDGET_BYTES = 550_000
BUDGET_REQUESTS = 15
FROM_CACHE = {"HIT", "UPDATING", "STALE"}
LIVE_BEFORE_S = 8.0  # the live trainer's head start: more than two pieces of versions at its pace
CHROMIUM = os.environ.get("RUNCAST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def kind(url: str) -> str:
    path = httpx.URL(url).path
    if path.startswith("/runs/"):
        return "html"
    if path.startswith("/vendor/"):
        return "plotly"
    if path.startswith(("/js/", "/dist/")) or path.endswith((".js", ".css")):
        return "scripts+css"
    if path.startswith("/i18n/"):
        return "catalogs"
    if "/broadcast/" in path:
        return "broadcast"
    return "api reads"


def row(name: str, load: list[Fetched]) -> str:
    by_kind: Counter[str] = Counter()
    for f in load:
        by_kind[kind(f.url)] += f.bytes
    cached = sum(f.cache in FROM_CACHE for f in load)
    total = sum(f.bytes for f in load)
    kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]))
    statuses = ", ".join(f"{s} {n}" for s, n in Counter(str(f.cache) for f in load).most_common())
    return f"| {name} | {len(load)} | {total:,} | {cached} of {len(load)} | {statuses} | {kinds} |"


def _poll(url: str, stop: threading.Event) -> None:
    """The rest of the crowd, as far as the edge goes: it is read every 10 ms."""
    with httpx.Client(headers={"Accept-Encoding": "gzip, deflate, br"}) as c:
        while not stop.is_set():
            c.get(url)
            time.sleep(0.01)


def _train(run: object, first: int, stop: threading.Event) -> None:
    """The trainer, live: 10 steps a second (the SDK sends each as it comes) until ``stop``."""
    step = first
    while not stop.wait(0.1):
        run.log({k: 1.0 / (step + 1) + i for i, k in enumerate(KEYS)}, step=step)  # type: ignore[attr-defined]
        step += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", type=int, default=2000, help="Steps the run has logged when the viewers come.")
    ap.add_argument("--verbose", action="store_true", help="Every request of every viewer too.")
    args = ap.parse_args()
    import runcast
    from playwright.sync_api import sync_playwright

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs; load average before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="runcast-first-load-") as tmp:
        data = Path(tmp)
        os.chmod(tmp, 0o755)
        env = {"RUNCAST_DATA_DIR": str(data), "RUNCAST_PUBLIC_FOLLOW": "cache"}
        token = services.create_token(env, "bench")
        api, url = services.start_api(env, data / "api.log")
        files = data / "files"
        files.mkdir()
        proxy = Nginx([url], files, data / "logs").start()
        try:
            run = runcast.init(project="bench", name="front page", server=url, token=token, capture_code=False)
            for s in range(args.points):  # the history, at once
                run.log({k: 1.0 / (s + 1) + i for i, k in enumerate(KEYS)}, step=s)
            assert run.flush(timeout=60)
            live = threading.Event()
            trainer = threading.Thread(target=_train, args=(run, args.points, live))
            trainer.start()
            time.sleep(LIVE_BEFORE_S)  # the edge and the last pieces hold live-paced versions
            page = f"{proxy.url}/runs/{run.id}"
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
                first = first_load(browser, page)
                crowd = threading.Event()
                edge = threading.Thread(target=_poll, args=(f"{proxy.url}/api/v1/runs/{run.id}/broadcast/edge", crowd))
                edge.start()
                time.sleep(2 - time.time() % 2 + 0.02)
                with httpx.Client(headers={"Accept-Encoding": "gzip, deflate, br"}) as c:
                    for f in first:
                        if "/api/v1/" in f.url:
                            c.get(f.url)
                after = first_load(browser, page)
                crowd.set()
                edge.join()
                time.sleep(3)
                later = first_load(browser, page)
                browser.close()
            live.set()
            trainer.join()
            run.finish()
        finally:
            proxy.stop()
            api.stop()
    print(f"load average after: {os.getloadavg()}; budget: {BUDGET_BYTES:,} B and {BUDGET_REQUESTS} requests")
    print("| viewer | requests | bytes | from nginx's cache | X-Cache-Status | bytes by kind |")
    print("|---|--:|--:|--:|---|---|")
    for name, load in (("first", first), ("next", after), ("later", later)):
        print(row(name, load))
    if args.verbose:
        for name, load in (("first", first), ("next", after), ("later", later)):
            for f in load:
                print(name, f.status, f.cache, f.bytes, f.url)


if __name__ == "__main__":
    main()
