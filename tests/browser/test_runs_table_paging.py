"""The runs page sorted by a config value: "more" loads the next page of the listing the first page
began (as_of), so a run created in between neither repeats a row nor pushes one off."""

from __future__ import annotations

import os
from pathlib import Path

ROWS = "#runs tbody tr[data-id]"


def test_more_after_a_run_was_created_shows_each_run_once(live_server, page):
    for i in range(52):
        run = live_server.sdk_run(name=f"r{i:02d}", config={"lr": 1e-3 * (1 + i % 4)})
        run.finish(timeout=20)
    page.goto(live_server.url + "/?sort=config.lr&dir=asc&col=config.lr")
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length === 50")
    first = page.eval_on_selector_all(f"{ROWS} td.name a", "as => as.map(a => a.textContent)")
    late = live_server.sdk_run(name="late", config={"lr": 1e-9})  # sorts first: would shift an offset page
    late.finish(timeout=20)
    with page.expect_request(lambda r: "offset=50" in r.url) as request:
        page.click("#more")
    assert "as_of=" in request.value.url
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length === 52")
    shown = page.eval_on_selector_all(f"{ROWS} td.name a", "as => as.map(a => a.textContent)")
    assert shown[:50] == first and sorted(shown) == [f"r{i:02d}" for i in range(52)]
    assert page.is_hidden("#more")
    if shot := os.environ.get("RUNCAST_SCREENSHOT"):
        page.screenshot(path=str(Path(shot) / "runs-table-paging.png"), full_page=True)
