"""A live run page with real data: the reference trainer (`runcast train`) crashes after a loss
spike, resumes from its last checkpoint in a new segment, and is photographed while it trains.

The picture goes to $RUNCAST_SCREENSHOT when set (the README's is made with
``RUNCAST_SCREENSHOT=docs/screenshot-run.png``), else into the test's temp dir.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import open_run

pytestmark = pytest.mark.slow

TRAIN = [
    "--n-layer", "2", "--n-embd", "64", "--n-head", "4", "--block-size", "64", "--batch-size", "8",
    "--data-limit", "200", "--max-steps", "1000", "--eval-interval", "20", "--eval-iters", "2",
    "--ckpt-interval", "50", "--keep-last", "2", "--keep-best", "1", "--project", "tinygpt",
    "--name", "tinygpt-2x64", "--mix", "0:code=0.7,prose=0.3;60:code=0.4,prose=0.6",
]


def train(server, tmp: Path, *extra: str) -> subprocess.Popen[str]:  # type: ignore[no-untyped-def]
    args = [sys.executable, "-m", "runcast.cli.main", "train", "--out-dir", str(tmp / "out"), *TRAIN,
            "--server", server.url, "--token", server.token("tinygpt"), *extra]
    env = {**os.environ, "RUNCAST_SPOOL_DIR": str(tmp / "train-spool")}
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def test_screenshot_of_a_live_reference_run(live_server, browser, tmp_path):
    first = train(live_server, tmp_path, "--inject-spike-at", "80", "--crash-at", "110")
    out, _ = first.communicate(timeout=600)
    assert first.returncode == 1, out
    run_id = re.search(r"as run (\S+)", out).group(1)

    # The resume inherits --max-steps 1000 from the checkpoint: still running when the page is
    # photographed, stopped afterwards.
    second = train(live_server, tmp_path, "--resume", str(tmp_path / "out" / "ckpt_0000100.pt"))
    context = browser.new_context(viewport={"width": 1440, "height": 1100}, color_scheme="light")
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        open_run(page, live_server, run_id)
        # Live: the resumed segment grows on the open page.
        page.wait_for_function(
            "Number(document.getElementById('fact-step').textContent.replace(/,/g, '')) >= 140", timeout=600000
        )
        # The new segment reaches the header through a read of the run that the stream
        # triggers: on a loaded machine that read takes a while, so wait for it, bounded.
        page.wait_for_function(
            "document.getElementById('fact-segments').textContent === '2 (1 resumed)'", timeout=30000
        )
        assert page.text_content("#run-status") == "running"
        segments = page.evaluate(
            """() => [...new Set(document.getElementById('chart-main').data
                 .filter(t => t.meta && t.meta.role === 'raw').map(t => t.meta.segment + (t.meta.abandoned ? 'a' : '')))]"""
        )
        assert {"0", "0a", "1"} <= set(segments)  # both segments and the abandoned branch
        page.wait_for_selector("#mix-card:not([hidden])")
        target = Path(os.environ.get("RUNCAST_SCREENSHOT") or tmp_path / "screenshot-run.png").resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(target))
        assert target.stat().st_size > 20_000
        assert errors == []
    finally:
        context.close()
        second.terminate()
        second.communicate(timeout=120)
    assert second.returncode == -signal.SIGTERM  # stopped by us, not crashed
