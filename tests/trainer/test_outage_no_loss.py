"""The reference trainer loses no step when its server goes away mid-run.

A real embedded ``runcast serve`` is stopped after step 10 and started again (same port,
same data) at step 30 of a 40-step run. The trainer keeps training, the SDK spools what it
cannot send, replays the spool once the server is back, and every step's points end up
stored exactly once, as the REST API reports them.
"""

from __future__ import annotations

import re

import httpx
import pytest
import services

pytestmark = pytest.mark.slow

STEP_KEYS = ("train/loss", "lr", "grad_norm", "tokens_seen", "tokens_per_s", "step_time_s", "memory/rss_bytes")


def stored_steps(base: str, run_id: str, key: str) -> list[int]:
    """Every stored point of ``key`` as its step, one entry per point (raw level)."""
    body = httpx.get(f"{base}/api/v1/runs/{run_id}/metrics", params={"key": key, "max_points": 20000}, timeout=30).json()
    assert body["level"] == 0
    return [step for s in body["series"] for step, count in zip(s["step"], s["count"]) for _ in range(count)]


def test_server_down_for_a_stretch_loses_no_step(processes, tmp_path, monkeypatch, tiny_cfg):
    from runcast.train import train
    from runcast.train.model import GPT, GPTConfig
    from runcast.train.trainer import open_run

    env = {"RUNCAST_DATA_DIR": str(tmp_path / "server-data")}
    token = processes.cli("token", "create", "--project", "tiny", **env).stdout.strip().splitlines()[-1]
    port = services.free_port()
    server = processes.start_api(port=port, **env)
    base = processes.api_url
    spool = tmp_path / "spool"
    monkeypatch.setenv("RUNCAST_SPOOL_DIR", str(spool))

    steps, down_at, up_at = 40, 10, 30
    cfg = tiny_cfg(max_steps=steps, server=base, token=token, project="tiny", name="outage")
    # The trainer's own open_run (what `runcast train --server` does), held here so the
    # test can make the sender try while the server is down.
    n_params = GPT(GPTConfig(cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size, 256, cfg.dropout)).num_params()
    run = open_run(cfg, n_params, None, lambda *_: None)
    outage_spooled: list[int] = []

    def on_log(line: str) -> None:  # the trainer's log callback: "step K: loss ..." at 1, 10, 20, ...
        nonlocal server
        m = re.match(r"step (\d+): loss", line)
        if not m:
            return
        step = int(m.group(1))
        if step == down_at:
            server.stop()
            # The sender meets the dead server: steps up to here go to the spool. A flush cannot
            # complete while the server is down (it returns at its timeout), so it is kept short.
            run.flush(timeout=6)
        elif step == 20:
            run.flush(timeout=6)  # still down: steps 11-20 go to the spool as well
            outage_spooled.append(run.stats.spooled)
            assert list(spool.glob("*/batches.jsonl")), "nothing was spooled during the outage"
        elif step == up_at:
            server = processes.start_api(port=port, **env)

    summary = train(cfg, run=run, log=on_log)

    # The trainer ran every step; finish() waited for the replay.
    assert summary["step"] == steps and sorted(summary["losses"]) == list(range(1, steps + 1))
    stats = run.stats
    assert outage_spooled and outage_spooled[0] > 0 and stats.replayed >= outage_spooled[0]
    assert stats.dropped == 0 and stats.queued == 0 and stats.sent == stats.logged, stats
    assert not list(spool.glob("*/batches.jsonl")), "the spool was not fully replayed"

    # Every step's points are stored exactly once, read back through the REST API.
    for key in STEP_KEYS:
        assert stored_steps(base, run.id, key) == list(range(1, steps + 1)), key
    assert stored_steps(base, run.id, "val/loss") == list(range(4, steps + 1, 4))
    assert httpx.get(f"{base}/api/v1/runs/{run.id}", timeout=30).json()["status"] == "finished"
