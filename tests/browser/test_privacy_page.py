"""The run page of a real ``runcast train`` broadcast shows no path, host name or pid of the run
unless the run opted in (``--public-paths``), and renders either way (the page has no token)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from integration.privacy import PROJECT, leaks, start_training, trainer_host

from .conftest import open_run

pytestmark = pytest.mark.slow


def rendered(page, server, run_id: str) -> str:  # type: ignore[no-untyped-def]
    """The page's DOM once the config, environment and checkpoint timeline are drawn."""
    open_run(page, server, run_id)
    page.wait_for_selector("#timeline li.tl-checkpoint")
    page.wait_for_function("document.querySelector('#config').textContent.includes('Environment')")
    return page.content()


def test_run_page_shows_file_names_not_paths_host_or_pid(live_server, page, tmp_path: Path) -> None:
    token = live_server.token(PROJECT)
    storage = live_server.data_dir / "storage"
    private = start_training(live_server.url, token, storage / "private", tmp_path / "a")
    opted_in = start_training(live_server.url, token, storage / "open", tmp_path / "b", "--public-paths")
    private_id, open_id = private.wait_for_run(live_server.url), opted_in.wait_for_run(live_server.url)
    private.finish()
    opted_in.finish()
    project = httpx.Client(base_url=f"{live_server.url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    pids = {run: str(project.get(f"/runs/{run}").json()["env"]["pid"]) for run in (private_id, open_id)}

    html = rendered(page, live_server, private_id)
    secrets = {"data directory": str(live_server.data_dir), "out_dir": str(storage / "private"),
               "host name": trainer_host(), "pid": pids[private_id]}
    assert leaks(html, secrets) == []
    assert "ckpt_0000010.pt" in page.text_content("#timeline") and "[withheld]" in page.text_content("#config")

    html = rendered(page, live_server, open_id)
    shown = {"out_dir": str(storage / "open"), "host name": trainer_host(), "pid": pids[open_id]}
    assert leaks(html, shown) == list(shown)
    assert page.errors == [] and page.dialogs == []
