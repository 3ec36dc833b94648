"""Browser tests of the dashboard: a real `runcast serve` (embedded SQLite in a temp data dir,
uvicorn in a subprocess) and Debian's Chromium driven by Playwright's sync API.

Fixtures:

``live_server``   a ``LiveServer``: ``url``, ``token(project)``, ``restart()`` on the same port
                  and data dir, ``sdk_run(...)`` (a real SDK run sending to it over HTTP)
``browser``       one headless Chromium for the session (never downloaded: /usr/bin/chromium)
``page``          a fresh page; ``page.dialogs`` and ``page.errors`` collect alert() calls and
                  uncaught page errors (every test asserts both stay empty)

Every test here is marked ``browser``: deselect them with ``-m "not browser"``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import services

CHROMIUM = os.environ.get("RUNCAST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


class LiveServer:
    """``runcast serve`` on a fixed port and data dir; can be stopped and started again."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.data_dir = tmp / "data"
        self.spool = tmp / "spool"
        self.port = services.free_port()
        self.env = {"RUNCAST_DATA_DIR": str(self.data_dir)}
        self.proc: services.Process | None = None
        self.url = f"http://127.0.0.1:{self.port}"
        self.starts = 0
        self.runs: list[Any] = []
        self._tokens: dict[str, str] = {}

    def start(self) -> LiveServer:
        self.starts += 1
        self.proc, self.url = services.start_api(
            self.env, self.tmp / f"api.{self.starts}.log", port=self.port
        )
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def token(self, project: str = "demo") -> str:
        if project not in self._tokens:
            import subprocess

            res = subprocess.run(
                [str(services.BIN / "runcast"), "token", "create", "--project", project],
                env=services.child_env(self.env),
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            self._tokens[project] = res.stdout.strip().splitlines()[-1]
        return self._tokens[project]

    def sdk_run(self, project: str = "demo", name: str = "run", **kwargs: Any) -> Any:
        """A real SDK run sending here over HTTP (short flush interval, fast retries)."""
        import runcast

        options: dict[str, Any] = {
            "flush_interval": 0.1,
            "retry_initial": 0.2,
            "retry_max": 1.0,
            "spool_dir": str(self.spool),
            "capture_code": False,
        }
        options.update(kwargs)
        run = runcast.init(project=project, name=name, server=self.url, token=self.token(project), reinit="create_new",
                           **options)  # a test may hold several runs open at once
        self.runs.append(run)
        return run

    def close(self) -> None:
        for run in self.runs:
            try:
                run.finish(timeout=2)
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
        self.stop()


@pytest.fixture
def live_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    for key in list(os.environ):
        if key.startswith("RUNCAST_") and key not in ("RUNCAST_CHROMIUM", "RUNCAST_SCREENSHOT"):
            monkeypatch.delenv(key)
    server = LiveServer(tmp_path)
    server.token("demo")  # creates and migrates the database before the server starts
    server.start()
    try:
        yield server
    finally:
        server.close()


# Package scope, not session: Playwright's sync API keeps an event loop running in the
# main thread while it is open, and later tests that call asyncio.run() would fail.
@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    # English, whatever the machine's locale: the tests read the pages' English words (test_i18n.py: zh-CN).
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    pg = context.new_page()
    pg.dialogs = []
    pg.errors = []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    try:
        yield pg
    finally:
        context.close()


# --- helpers the tests share ------------------------------------------------------------------

# The pixel where the loss chart draws a raw point of ``key``: the one at ``step``, or the middle one
# (``step`` null); Plotly's own axes place it, a step axis or a wall-clock one.
POINT_AT = """([key, step]) => {
  const gd = document.getElementById('chart-main');
  const t = gd.data.find(t => t.meta && t.meta.role === 'raw' && t.meta.key === key);
  const i = step === null ? Math.floor(t.x.length / 2) : Array.from(t.x).indexOf(step);
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
  return [box.left + xa._offset + xa.l2p(xa.d2l(t.x[i])), box.top + ya._offset + ya.l2p(ya.d2l(t.y[i]))];
}"""
MAIN_RAW_X = """() => {
  const gd = document.getElementById('chart-main');
  return (gd.data || []).filter(t => t.meta && t.meta.role === 'raw' && !t.meta.abandoned)
    .map(t => ({segment: t.meta.segment, x: Array.from(t.x)}));
}"""


def open_run(page: Any, server: LiveServer, run_id: str, query: str = "") -> None:
    """Open the run page and wait for its first draw."""
    page.goto(f"{server.url}/runs/{run_id}{query}")
    page.wait_for_function("window.__runcastDrawn !== undefined", timeout=20000)


def main_xs(page: Any) -> list[int]:
    """Every step drawn by the main chart's raw traces (kept parts), in order."""
    return [x for t in page.evaluate(MAIN_RAW_X) for x in t["x"]]
