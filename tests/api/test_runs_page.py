"""The plain runs page in a real (headless) browser: public runs listed, names shown as text."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import services

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
HOSTILE = "<img src=x onerror=alert(1)>"

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="chromium is not installed"
)


@pytest.fixture
def server(client, embedded_env: Path, tmp_path: Path) -> Iterator[str]:
    proc, url = services.start_api(
        {"RUNCAST_DATA_DIR": str(embedded_env)}, tmp_path / "api.log"
    )
    try:
        yield url
    finally:
        proc.stop()


def test_runs_page_lists_public_runs_as_text(server, seed):
    sync_api = pytest.importorskip("playwright.sync_api")
    run = seed.run("evil-project", name=HOSTILE).start()
    run.log({"loss": [(41, 2.5)]})
    seed.run("evil-project", name="secret").start(visibility="private")
    seed.run("evil-project", name="link-only").start(visibility="unlisted")

    dialogs: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page()
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(server + "/")
            page.wait_for_selector("#runs tbody tr")
            rows = page.eval_on_selector_all(
                "#runs tbody tr",
                # a cell's value (phone layouts put a label beside it, in its own element)
                "rows => rows.map(r => [...r.cells].map(c => (c.querySelector('.cell-value') || c).textContent))",
            )
            images = page.eval_on_selector_all("#runs img", "imgs => imgs.length")
        finally:
            browser.close()
    # Only the public run is listed; its cells hold the run's fields as plain text,
    # whatever the page's exact columns (the dashboard may add some).
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0]]
    assert any(HOSTILE in c for c in cells)
    for text in ("evil-project", "running", "41"):
        assert text in cells, (text, cells)
    assert any(c.startswith("2.5") for c in cells), cells
    assert images == 0
    assert dialogs == []
