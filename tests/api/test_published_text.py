"""Client-sent manifests and code diffs are served scrubbed on every read path."""

from __future__ import annotations

from typing import Any

DIFF = '+WANDB_API_KEY = "abcd1234abcd1234abcd1234abcd1234"\n+lr = 3e-4\n'
MANIFEST = {"samples": ["mail jane.doe@example.org for access"], "files": [{"sha256": "a" * 64}]}


def test_events_and_detail_scrub_manifests_and_diffs(client: Any, seed: Any) -> None:
    sim = seed.run(name="scrubbed").start(code={"sha": "f" * 40, "diff": DIFF})
    sim.send([sim.event("manifest", version="v1", manifest=MANIFEST, step=0)])

    detail = client.get(f"/api/v1/runs/{sim.run}").json()
    assert "abcd1234" not in detail["code"]["diff"]
    assert "lr = 3e-4" in detail["code"]["diff"]

    events = client.get(f"/api/v1/runs/{sim.run}/events").json()["events"]
    by_type = {e["type"]: e["payload"] for e in events}
    assert by_type["manifest"]["manifest"]["samples"] == ["mail [EMAIL] for access"]
    assert by_type["manifest"]["manifest"]["files"][0]["sha256"] == "a" * 64
    assert "abcd1234" not in by_type["run_started"]["code"]["diff"]
