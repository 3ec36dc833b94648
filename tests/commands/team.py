"""The team's side for tests that drive a live training script: send a command and block the training
step until the trainer's SDK holds it, so the step boundary right after takes it (deterministic)."""

from __future__ import annotations

import time
from typing import Any

import httpx

API = "/api/v1"


def listed(url: str, run: str) -> dict[str, dict[str, Any]]:
    """The run's commands by id, as the public reads them."""
    return {c["command"]: c for c in httpx.get(f"{url}{API}/runs/{run}/commands", timeout=30).json()["commands"]}


def deliver(url: str, token: str, run: Any, body: dict[str, Any]) -> str:
    """Send ``body`` as the team to ``run`` (the script's open ``runcast.Run``); return once its SDK holds it.

    Observed from outside, as the server and the SDK's public calls tell it: the command left
    "pending" (an ingest answer carried it, or the SDK refused it at once for a script that did not
    opt in), then every batch the SDK sent so far was answered (``run.flush()`` is True). Under load
    the answer that carried it can time out: the SDK sends that batch again, and the answer to it
    carries the command again (an open command goes with every answer for its run), so it holds it."""
    run.flush()  # the tunables declared at train start are on the server
    res = httpx.post(f"{url}{API}/runs/{run.id}/commands", timeout=30, json={"reason": "because", **body},
                     headers={"Authorization": f"Bearer {token}"})
    assert res.status_code == 201, res.text
    uid: str = res.json()["command"]
    deadline = time.monotonic() + 120  # a failure's bound, not a timing
    while listed(url, run.id)[uid]["state"] == "pending":
        assert time.monotonic() < deadline, f"never delivered: {listed(url, run.id)[uid]}"
        run.flush(timeout=5)
        time.sleep(0.05)
    while not run.flush(timeout=5):
        assert time.monotonic() < deadline, f"the SDK's batches were never answered: {listed(url, run.id)[uid]}"
    return uid
