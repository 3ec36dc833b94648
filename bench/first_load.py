"""First load of a run page for a run of 10^7 points: time to the curve drawn, bytes moved.

Fills an embedded SQLite database (a temp data dir, or ``--data-dir DIR`` to keep and
reuse it) with one run of ``--points`` steps of ``train/loss`` through the real write path
(``store_batch``, batches of 20,000), starts ``runcast serve`` on it, and opens
``/runs/<id>`` in headless Chromium ``--repeat`` times:

* cold: a fresh browser context each time (empty cache: Plotly.js comes over the wire);
* warm: a reload in the same context (Plotly.js from the HTTP cache, kept as immutable).

The server serves the Plotly.js partial bundle when ``scripts/install`` installed it
(``vendor/node_modules``); ``--full-bundle`` makes it serve the plotly package's full
bundle instead (``RUNCAST_VENDOR_DIR`` pointed at an empty directory), to compare the two.

First curve = navigation start -> ``window.__runcastPainted`` (the page's first curve on
screen: the light drawing before Plotly.js, js/chart/sketch.js; a page without it: its first
Plotly draw). Time to drawn = navigation start -> ``window.__runcastDrawn`` (set by the page
after its first Plotly draw). Bytes = transfer sizes (headers + encoded bodies) of the document and
every resource that finished before that mark. The table is printed, and with
``--record`` appended to docs/performance.md under "Dashboard first load". Usage::

    .venv/bin/python bench/first_load.py --points 10000000 --data-dir /tmp/rc-bench --record
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_ID = "first-load-bench-0001"
KEY = "train/loss"
# --keys N logs the first N of these at every step (issue 31: 4 metrics of 20,000 steps).
KEYS = ("train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s")
BATCH = 20_000
CHROMIUM = os.environ.get("RUNCAST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run",
]

MEASURE = """() => {
  const drawn = window.__runcastDrawn;
  // The first curve on screen: the light drawing before Plotly.js (since issue 31), else Plotly's.
  const painted = window.__runcastPainted ?? drawn;
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource').filter(r => r.responseEnd <= drawn);
  const size = (e) => e.transferSize || 0;
  const byName = {};
  for (const r of res) {
    const name = new URL(r.name).pathname.replace(/^\\/api\\/v1\\/runs\\/[^/]+/, '/api/v1/runs/{id}');
    byName[name] = (byName[name] || 0) + size(r);
  }
  return {drawn, painted, bytes: size(nav) + res.reduce((n, r) => n + size(r), 0), requests: res.length + 1,
          byName, points: window.__runcast.pointCount()};
}"""


def value(key: str, s: int, points: int) -> float:
    loss = 2.0 + 8.0 * math.exp(-s / (points / 20)) + 0.05 * math.sin(s / 7.0) + (3.0 if s % 1_000_003 == 17 else 0.0)
    scale = {KEY: 1.0, "train/lr": 1e-4, "train/grad_norm": 0.3, "train/tokens_per_s": 1000.0}[key]
    return loss * scale


def fill(data_dir: Path, points: int, keys: int = 1) -> float:
    """One run of ``points`` steps of ``keys`` keys (detectors off: this measures reads); returns seconds."""
    from runcast.wire import events as ev
    from runcast_server.core import migrate
    from runcast_server.core.auth import create_token
    from runcast_server.core.db import make_engine
    from runcast_server.core.models import Project
    from runcast_server.ingest.store import store_batch
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    data_dir.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{data_dir / 'runcast.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    with Session(engine) as session, session.begin():
        create_token(session, "bench", label="first-load bench")
        project_id = session.scalar(select(Project.id).where(Project.name == "bench"))
    segment = ev.new_id()
    began = time.perf_counter()
    started = ev.validate_event({
        "v": 1, "type": "run_started", "run": RUN_ID, "segment": segment, "seq": 0, "ts": time.time(),
        "project": "bench", "name": f"first load, {points:,} steps", "alerts": {"enabled": False},
        "config": {"points": points},
    })
    with Session(engine) as session, session.begin():
        store_batch(session, project_id, [started])
    ts = time.time()
    for lo in range(0, points, BATCH):
        # Built directly in the validated shape (validate_event would only cost time here).
        batch = [
            {"v": 1, "type": "metrics", "run": RUN_ID, "segment": segment, "seq": s + 1, "ts": ts, "step": s,
             "values": {k: value(k, s, points) for k in KEYS[:keys]}}
            for s in range(lo, min(lo + BATCH, points))
        ]
        with Session(engine) as session, session.begin():
            store_batch(session, project_id, batch)
        done = min(lo + BATCH, points)
        if done % 1_000_000 < BATCH:
            print(f"  filled {done:,} points ({done / (time.perf_counter() - began):,.0f}/s)", flush=True)
    engine.dispose()
    return time.perf_counter() - began


def serve(data_dir: Path, port: int, log: Path, full_bundle: bool = False) -> subprocess.Popen[bytes]:
    import httpx

    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNCAST_")}
    env["RUNCAST_DATA_DIR"] = str(data_dir)
    if full_bundle:
        env["RUNCAST_VENDOR_DIR"] = str(data_dir / "no-node-modules")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "runcast"), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"runcast serve exited; log: {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit("runcast serve did not come up")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(base: str, repeat: int, width: int) -> tuple[list[dict], list[dict], list[dict]]:
    from playwright.sync_api import sync_playwright

    floor: list[dict] = []
    cold: list[dict] = []
    warm: list[dict] = []
    url = f"{base}/runs/{RUN_ID}"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            # One throwaway load: the server's first request compresses Plotly.js once.
            ctx = browser.new_context(viewport={"width": width, "height": 900})
            ctx.new_page().goto(url, wait_until="load")
            ctx.close()
            for _ in range(repeat):
                # The floor: Plotly.js alone (download, compile, run) in an empty cache.
                ctx = browser.new_context()
                page = ctx.new_page()
                page.goto(f"{base}/healthz")
                got = page.evaluate(
                    """() => new Promise((ok) => { const t = performance.now(); const s = document.createElement('script');
                         s.src = '/vendor/plotly.min.js';
                         s.onload = () => { const r = performance.getEntriesByType('resource').at(-1);
                           ok({ms: performance.now() - t, wire: r.transferSize, size: r.decodedBodySize}); };
                         document.head.appendChild(s); })"""
                )
                floor.append({"drawn": got["ms"], "bytes": got["wire"], "size": got["size"], "requests": 1, "points": 0})
                ctx.close()
                ctx = browser.new_context(viewport={"width": width, "height": 900})
                page = ctx.new_page()
                page.goto(url)
                page.wait_for_function("window.__runcastDrawn !== undefined", timeout=60000)
                cold.append(page.evaluate(MEASURE))
                page.reload()
                page.wait_for_function("window.__runcastDrawn !== undefined", timeout=60000)
                warm.append(page.evaluate(MEASURE))
                ctx.close()
        finally:
            browser.close()
    return cold, warm, floor


def summarize(name: str, rows: list[dict]) -> dict:
    times = sorted(r["drawn"] for r in rows)
    painted = sorted(r["painted"] for r in rows)
    return {
        "case": name,
        "painted_ms": statistics.median(painted),
        "painted_max_ms": painted[-1],
        "median_ms": statistics.median(times),
        "max_ms": times[-1],
        "bytes": int(statistics.median(r["bytes"] for r in rows)),
        "requests": rows[0]["requests"],
        "points": rows[0]["points"],
    }


def table(summaries: list[dict]) -> str:
    lines = [
        "| load | first curve on screen, median (max) | Plotly's first draw, median (max) | bytes until drawn | requests | points drawn |",
        "|------|-------------------------------------|-----------------------------------|-------------------|----------|--------------|",
    ]
    for s in summaries:
        lines.append(
            f"| {s['case']} | {s['painted_ms']:.0f} ms ({s['painted_max_ms']:.0f} ms) | "
            f"{s['median_ms']:.0f} ms ({s['max_ms']:.0f} ms) | {s['bytes']:,} | "
            f"{s['requests']} | {s['points']:,} |"
        )
    return "\n".join(lines)


def record(text: str) -> None:
    path = ROOT / "docs" / "performance.md"
    heading = "## Dashboard first load"
    body = path.read_text() if path.exists() else "# Performance\n"
    if heading not in body:
        body = body.rstrip("\n") + f"\n\n{heading}\n\n" + (
            "Time from navigation start to the first Plotly draw of `/runs/{id}` "
            "(`window.__runcastDrawn`) for a run of 10^7 points, and the bytes moved until then; "
            "measured by `bench/first_load.py` in headless Chromium against `runcast serve` "
            "(embedded SQLite) on the same machine. Target: < 1.5 s.\n"
        )
    start = body.index(heading) + len(heading)
    nxt = body.find("\n## ", start)
    end = len(body) if nxt < 0 else nxt
    body = body[:end].rstrip("\n") + "\n\n" + text.strip("\n") + "\n" + body[end:]
    path.write_text(body if body.endswith("\n") else body + "\n")
    print(f"appended to {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", type=int, default=10_000_000, help="steps")
    ap.add_argument("--keys", type=int, default=1, choices=range(1, len(KEYS) + 1), help="keys logged at every step")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--width", type=int, default=1400, help="browser viewport width (px)")
    ap.add_argument("--data-dir", type=Path, help="keep the database here and reuse it when it exists")
    ap.add_argument("--full-bundle", action="store_true", help="serve the plotly package's full Plotly.js bundle")
    ap.add_argument("--record", action="store_true", help="append the results to docs/performance.md")
    args = ap.parse_args()

    tmp = None
    data_dir = args.data_dir
    if data_dir is None:
        tmp = tempfile.mkdtemp(prefix="runcast-first-load-")
        data_dir = Path(tmp)
    fill_s = None
    if not (data_dir / "runcast.db").exists():
        print(f"filling {args.points:,} points into {data_dir} ...", flush=True)
        fill_s = fill(data_dir, args.points, args.keys)
        print(f"filled in {fill_s:.0f} s", flush=True)
    port = free_port()
    load_before = os.getloadavg()[0]
    proc = serve(data_dir, port, data_dir / "serve.log", args.full_bundle)
    try:
        cold, warm, floor = measure(f"http://127.0.0.1:{port}", args.repeat, args.width)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    summaries = [summarize("cold (empty cache)", cold), summarize("warm (reload)", warm)]
    out = table(summaries)
    plotly_ms = statistics.median(f["drawn"] for f in floor)
    load = os.getloadavg()
    size, wire = floor[0]["size"], floor[0]["bytes"]
    out += (f"\n\nFor scale: loading Plotly.js alone ({size / 1e6:.1f} MB, {wire / 1e3:,.0f} kB on the wire, "
            f"empty cache) took {plotly_ms:.0f} ms "
            f"(median) in the same browser; load average (1 min): {load_before:.1f} at the start, {load[0]:.1f} "
            f"at the end, on {os.cpu_count()} CPUs.")
    print(out)
    print("cold bytes by path:", {k: v for k, v in sorted(cold[0]["byName"].items())})
    if args.record:
        cpu = platform.processor() or platform.machine()
        lines = [
            f"### {time.strftime('%Y-%m-%d')}: {args.points:,} points, {args.repeat} loads each, viewport {args.width} px",
            "",
            f"Machine: {os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, Chromium headless. "
            + (f"Fill (store_batch, SQLite): {fill_s:.0f} s. " if fill_s else "")
            + "Command: `.venv/bin/python bench/first_load.py "
            + " ".join(a for a in sys.argv[1:] if a != "--record") + "`",
            "",
            out,
            "",
            "Bytes by path, cold: " + ", ".join(f"`{k}` {v:,}" for k, v in sorted(cold[0]["byName"].items())) + ".",
        ]
        record("\n".join(lines))


if __name__ == "__main__":
    main()
