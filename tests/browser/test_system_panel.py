"""The run page's System panel: one chart per figure with a line per node and rank and a
min/max band across the ranks, drawn from what the API stores; system keys stay out of the
training charts. Rank 0 trains through the SDK; the two ranks' samplers (the SDK's own
``SystemSampler`` with fixed figures, so the band is known) send to the same server."""

from __future__ import annotations

from typing import Any

import httpx
from runcast import system
from runcast.sender.transport import make_transport

from .conftest import open_run

T0 = 1_780_000_000.0
FIGURES = {0: [40.0, 60.0, 50.0, 70.0], 1: [80.0, 20.0, 55.0, 65.0]}  # cpu/process_percent per rank


class Fixed:
    def __init__(self, values: list[float]) -> None:
        self.values = iter(values)

    def sample(self) -> dict[str, float]:
        return {"cpu/process_percent": next(self.values), "memory/process_rss_mb": 100.0}

    def close(self) -> None:
        pass


SYSTEM_TRACES = """() => [...document.querySelectorAll('#system-panels section')].map(s => ({
  label: s.getAttribute('aria-label'),
  traces: (s.querySelector('.js-plotly-plot') || {data: []}).data.map(t => ({
    role: t.meta && t.meta.role, key: t.meta && t.meta.key, name: t.name,
    x: Array.from(t.x), y: Array.from(t.y)})),
}))"""


def test_the_system_panel_draws_every_rank_and_the_band(live_server: Any, page: Any, tmp_path: Any) -> None:
    run = live_server.sdk_run(name="system", system_metrics=False)
    for step in range(5):
        run.log({"train/loss": 1.0 / (step + 1)}, step=step)
    assert run.flush(10)
    for rank, values in FIGURES.items():
        clock = [T0 + rank * 0.3]
        sampler = system.SystemSampler(
            run=run.id, segment=run.segment, rank=rank, prefix=f"system/node0/rank{rank}", interval=1.0,
            collector=Fixed(values),  # type: ignore[arg-type]
            transport=make_transport(live_server.url, live_server.token("demo")), clock=lambda clock=clock: clock[0],
        )  # fmt: skip
        for _ in values:
            sampler.sample_once()
            clock[0] += 1.0
        sampler._send(10.0)
        assert sampler.sent == len(values)
    run.finish(timeout=10)
    detail = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}", timeout=30).json()
    assert detail["last_step"] == 4  # the samples' wall-clock steps are not the run's

    open_run(page, live_server, run.id)
    page.wait_for_selector("#system-card:not([hidden])")
    page.wait_for_function(
        "document.querySelectorAll('#system-panels .js-plotly-plot').length === 2", timeout=20000
    )
    assert page.text_content("#system-note") == "2 ranks: node0/rank0, node0/rank1"
    panels = {p["label"]: p["traces"] for p in page.evaluate(SYSTEM_TRACES)}
    assert list(panels) == ["system cpu/process_percent", "system memory/process_rss_mb"]
    cpu = panels["system cpu/process_percent"]
    # Each rank's line is what the API stores.
    for rank, values in FIGURES.items():
        key = f"system/node0/rank{rank}/cpu/process_percent"
        stored = httpx.get(f"{live_server.url}/api/v1/runs/{run.id}/metrics", params={"key": key}, timeout=30).json()
        steps = stored["series"][0]["step"]
        assert steps == [int(T0) + i for i in range(len(values))] and stored["series"][0]["last"] == values
        raw = next(t for t in cpu if t["role"] == "raw" and t["name"] == f"node0/rank{rank}")
        assert raw["y"] == values and raw["x"] == [s * 1000 for s in steps]  # a date axis, in ms
    band = {t["key"]: t["y"] for t in cpu if t["role"] == "band"}
    assert band == {"max": [max(a, b) for a, b in zip(*FIGURES.values(), strict=True)],
                    "min": [min(a, b) for a, b in zip(*FIGURES.values(), strict=True)]}  # fmt: skip
    # The training charts show no system key.
    picker = page.eval_on_selector_all("#key-picker input", "els => els.map(e => e.value)")
    assert picker == ["train/loss"]
    assert not page.eval_on_selector_all("#panels section", "els => els.map(e => e.getAttribute('aria-label'))")
    page.locator("#system-card").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "system.png"), full_page=True)
    assert page.errors == [] and page.dialogs == []
