"""The run page's published artifacts in headless Chromium against a real server fed by the SDK:
the checkpoints panel (download and card links), code revisions, alerts on the timeline and
the memory estimate."""

from __future__ import annotations

import json
import math

import pytest
import runcast.runtime

from .conftest import open_run
from browser.reads import rewrite_read

HOSTILE = "<img src=x onerror=alert(1)>"
SHA = "0123456789abcdef0123456789abcdef01234567"

FETCH_HEX = """async (href) => {
  const r = await fetch(href);
  const bytes = new Uint8Array(await r.arrayBuffer());
  return {status: r.status, hex: Array.from(bytes, b => b.toString(16).padStart(2, '0')).join(''),
          disposition: r.headers.get('content-disposition')};
}"""


def log_loss(run, steps, spike_at=None) -> None:  # type: ignore[no-untyped-def]
    """A flat loss; ``spike_at`` starts a two-point spike (one point alone opens no alert)."""
    for s in steps:
        value = 2.0 + 0.01 * math.sin(s) + (40.0 if spike_at is not None and spike_at <= s <= spike_at + 1 else 0.0)
        run.log({"train/loss": value}, step=s)
    assert run.flush(timeout=20)


def storage(live_server, project: str = "demo"):  # type: ignore[no-untyped-def]
    """The project's directory of the storage root: the only place its checkpoints are served from."""
    root = live_server.data_dir / "storage" / project
    root.mkdir(parents=True, exist_ok=True)
    return root


def test_checkpoints_panel_lists_and_downloads(live_server, page):
    run = live_server.sdk_run(name="ckpts")
    data = bytes(range(256)) * 40 + b"tail"
    ckpt = storage(live_server) / "run-a" / "step20.pt"
    ckpt.parent.mkdir()
    ckpt.write_bytes(data)
    pruned = storage(live_server) / "run-a" / "step10.pt"
    pruned.write_bytes(b"old")
    log_loss(run, range(1, 31))
    run.checkpoint(pruned, step=10)
    run.checkpoint(ckpt, step=20, metrics={"val/loss": 1.5})
    pruned.unlink()
    run.checkpoint(pruned, step=10, status="pruned")
    assert run.flush(timeout=20)

    open_run(page, live_server, run.id)
    page.wait_for_selector("#checkpoints li.ck-available")
    item = page.locator("#checkpoints li.ck-available")
    text = item.text_content()
    assert "step 20" in text and "available" in text and "10.0 KiB" in text and "step20.pt" in text
    assert "val/loss 1.5" in text
    import hashlib

    sha = hashlib.sha256(data).hexdigest()
    assert item.locator(".ck-sha code").text_content() == sha[:12]
    assert item.locator(".ck-sha code").get_attribute("title") == sha

    # The download link fetches exactly the file's bytes.
    href = item.locator("a.ck-download").get_attribute("href")
    assert href.endswith("/download")
    got = page.evaluate(FETCH_HEX, href)
    assert got["status"] == 200 and bytes.fromhex(got["hex"]) == data
    assert "step20.pt" in got["disposition"]

    # The card link opens the reproducibility card as a JSON attachment.
    card_href = item.locator("a.ck-card").get_attribute("href")
    assert card_href.endswith("/card?download=true")
    card = page.evaluate("async (h) => { const r = await fetch(h); return [r.status, await r.text()]; }", card_href)
    assert card[0] == 200 and json.loads(card[1])["checkpoint"]["sha256"] == sha

    # The pruned one is listed with its badge and no download link.
    pruned_item = page.locator("#checkpoints li.ck-pruned")
    assert "pruned" in pruned_item.locator(".ck-status").text_content()
    assert pruned_item.locator("a.ck-download").count() == 0
    assert pruned_item.locator("a.ck-card").count() == 1

    # A checkpoint recorded while the page is open appears without a reload.
    page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=10000)
    later = storage(live_server) / "run-a" / "step30.pt"
    later.write_bytes(b"later")
    run.checkpoint(later, step=30)
    assert run.flush(timeout=20)
    page.wait_for_function(
        "() => [...document.querySelectorAll('#checkpoints li.ck-available')].some(li => li.textContent.includes('step 30'))",
        timeout=10000,
    )
    assert page.errors == [] and page.dialogs == []


def test_hostile_revision_and_checkpoint_path_render_as_text(live_server, page, monkeypatch):
    code = {"sha": SHA, "branch": HOSTILE, "remote": "git@github.com:example/repo.git", "dirty": True,
            "diff": "diff --git a/x.py b/x.py\n+print('<script>alert(1)</script>')\n"}
    monkeypatch.setattr(runcast.runtime, "code_revision", lambda *a, **k: dict(code))
    run = live_server.sdk_run(name="hostile-artifacts", capture_code=True)
    ckpt = storage(live_server) / f"{HOSTILE}.pt"
    ckpt.write_bytes(b"hostile weights")
    log_loss(run, range(1, 11))
    run.checkpoint(ckpt, step=5)
    assert run.flush(timeout=20)

    open_run(page, live_server, run.id)
    page.wait_for_selector("#revisions li.revision")
    page.wait_for_selector("#checkpoints li.ck-available")
    assert HOSTILE in page.text_content("#revisions")
    assert page.text_content("#revisions .rev-sha") == SHA[:12]
    assert page.get_attribute("#revisions .rev-sha", "title") == SHA
    assert "dirty" in page.text_content("#revisions .rev-head")
    link = page.get_attribute("#revisions a.rev-link", "href")
    assert link == f"https://github.com/example/repo/commit/{SHA}"
    diff_href = page.get_attribute("#revisions a.rev-diff", "href")
    diff = page.evaluate("async (h) => (await fetch(h)).text()", diff_href)
    assert "<script>alert(1)</script>" in diff  # served as text/plain, nothing rendered
    assert page.text_content("#checkpoints .ck-file") == f"{HOSTILE}.pt"
    got = page.evaluate(FETCH_HEX, page.get_attribute("#checkpoints a.ck-download", "href"))
    assert bytes.fromhex(got["hex"]) == b"hostile weights"
    assert page.eval_on_selector_all("#run img", "n => n.length") == 0

    # A code-host link that is not http(s) never becomes an href.
    def javascript_link(body):  # type: ignore[no-untyped-def]
        for rev in body["revisions"]:
            rev["link"] = "javascript:alert(1)"

    rewrite_read(page, "revisions", javascript_link)
    open_run(page, live_server, run.id)
    page.wait_for_selector("#revisions li.revision")
    assert page.locator("#revisions a.rev-link").count() == 0
    assert page.locator("#revisions a.rev-diff").count() == 1
    assert page.eval_on_selector_all("a[href^='javascript']", "n => n.length") == 0
    assert page.errors == [] and page.dialogs == []


def test_alerts_listed_once_with_state_and_evidence(live_server, page):
    run = live_server.sdk_run(name="spiky")
    log_loss(run, range(1, 121), spike_at=80)
    open_run(page, live_server, run.id)
    page.wait_for_selector("#timeline li.tl-alert .alert-state")
    alerts = page.evaluate("async (u) => (await (await fetch(u)).json()).alerts", f"/api/v1/runs/{run.id}/alerts")
    spikes = [a for a in alerts if a["kind"] == "spike"]
    assert spikes, alerts
    spike = spikes[0]
    # Dated at the jump, opened by the next point, which is still high.
    assert (spike["step"], spike["evidence"]["open"]["confirmed_step"]) == (80, 81)
    item = page.locator(f"#timeline li#alert-{spike['id']}")
    assert item.locator(".alert-state").text_content() == spike["state"]
    assert "spike" in item.text_content() and "train/loss" in item.text_content()
    hover = item.locator(".tl-body").get_attribute("title")
    assert hover.startswith("open:") and "baseline" in hover and "threshold" in hover and "confirmed_step 81" in hover
    # One timeline entry and one chart marker per alert: the anomaly event and the alert are the same thing.
    assert page.locator("#timeline li.tl-alert").count() == len(alerts)
    # Anomalies have their own lane; a marker there lists every anomaly it stands for.
    lane = page.evaluate(
        """() => document.getElementById('chart-main').data
             .filter(t => t.meta && t.meta.role === 'anomalies').flatMap(t => t.hovertext)"""
    )
    assert sum(t.count("anomaly @ step") for t in lane) == len(alerts)
    # A notification's link lands on the entry (a fresh load: a hash change alone does not reload).
    page.goto("about:blank")
    open_run(page, live_server, run.id, f"#alert-{spike['id']}")
    page.wait_for_selector(f"#timeline li#alert-{spike['id']}.target")
    assert page.errors == [] and page.dialogs == []


@pytest.mark.parametrize("zero_config", [None, {"deepspeed": {"zero_optimization": {"stage": 2}}}])
def test_estimate_panel_for_a_config_with_a_parameter_count(live_server, page, zero_config):
    config = {"n_params": 7.5e9, "n_layer": 32, "n_embd": 4096, "n_head": 32, "block_size": 2048, "batch_size": 1}
    config.update(zero_config or {})
    run = live_server.sdk_run(name="big", config=config)
    log_loss(run, range(1, 6))
    open_run(page, live_server, run.id)
    page.wait_for_selector("#estimate-table")
    assert page.is_visible("#estimate-card")
    assert page.input_value("#est-params") == "7500000000"
    assert page.input_value("#est-gpus") == "1"  # env.world_size is not set in the test process
    stage = "2" if zero_config else "0"
    assert page.input_value("#est-zero") == stage
    rows = dict(page.evaluate(
        "() => [...document.querySelectorAll('#estimate-table tr')].map(r => [r.cells[0].textContent, r.cells[1].textContent])"
    ))
    # The ZeRO paper's accounting on one GPU: 2Ψ + 2Ψ + 12Ψ whatever the stage.
    assert rows["model states per GPU"] == "120.0 GB"
    assert rows["weights (fp16)"] == "15.0 GB"

    # Changing the inputs re-estimates: 64 GPUs at stage 3 is the paper's 1.9 GB.
    page.fill("#est-gpus", "64")
    page.select_option("#est-zero", "3")
    page.wait_for_function(
        """() => [...document.querySelectorAll('#estimate-table tr')]
             .some(r => r.cells[0].textContent === 'model states per GPU' && r.cells[1].textContent === '1.9 GB')""",
        timeout=5000,
    )
    # An impossible combination names the problem instead of a number.
    page.select_option("#est-zero", "0")
    page.check("#est-offload")
    page.wait_for_selector("#estimate .error")
    assert "offload" in page.text_content("#estimate .error")
    assert page.errors == [] and page.dialogs == []


def test_no_estimate_panel_without_a_parameter_count(live_server, page):
    run = live_server.sdk_run(name="small", config={"lr": 0.1})
    log_loss(run, range(1, 6))
    open_run(page, live_server, run.id)
    page.wait_for_selector("#checkpoints li.empty")
    assert page.locator("#estimate-card").is_hidden()
    assert "No checkpoints recorded." in page.text_content("#checkpoints")
    assert page.errors == []


def test_reference_trainer_run_shows_estimate_and_checkpoints(live_server, page, tmp_path):
    """`runcast train` for a few steps, checkpoints under the storage root: the page shows the
    memory estimate from its config (parameter count, shape) and downloadable checkpoints."""
    import os
    import re
    import subprocess
    import sys

    out_dir = storage(live_server, "tinygpt") / "run"
    args = [sys.executable, "-m", "runcast.cli.main", "train", "--out-dir", str(out_dir),
            "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "32", "--batch-size", "4",
            "--data-limit", "20", "--max-steps", "6", "--eval-interval", "3", "--eval-iters", "1",
            "--ckpt-interval", "3", "--keep-last", "1", "--keep-best", "0", "--warmup-steps", "1",
            "--project", "tinygpt", "--server", live_server.url, "--token", live_server.token("tinygpt")]
    env = {**os.environ, "RUNCAST_SPOOL_DIR": str(tmp_path / "train-spool")}
    res = subprocess.run(args, check=False, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    run_id = re.search(r"as run (\S+)", res.stdout + res.stderr).group(1)
    n_params = int(re.search(r"model: ([\d,]+) parameters", res.stdout + res.stderr).group(1).replace(",", ""))

    open_run(page, live_server, run_id)
    page.wait_for_selector("#estimate-table")
    assert page.input_value("#est-params") == str(n_params)
    assert page.input_value("#est-zero") == "0"
    rows = dict(page.evaluate(
        "() => [...document.querySelectorAll('#estimate-table tr')].map(r => [r.cells[0].textContent, r.cells[1].textContent])"
    ))
    assert rows["model states per GPU"] == f"{16 * n_params / 1e6:.1f} MB"
    assert "L=1, h=32, a=2, s=32, b=4" in page.text_content("#estimate")  # the shape from the config

    page.wait_for_selector("#checkpoints li.ck-available")
    href = page.get_attribute("#checkpoints li.ck-available a.ck-download", "href")
    got = page.evaluate(FETCH_HEX, href)
    name = re.search(r'filename="([^"]+)"', got["disposition"]).group(1)
    assert bytes.fromhex(got["hex"]) == (out_dir / name).read_bytes()
    assert page.locator("#checkpoints li.ck-pruned").count() >= 1  # retention kept the last one only
    assert page.errors == [] and page.dialogs == []
