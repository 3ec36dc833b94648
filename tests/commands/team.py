"""The team's side for tests that drive a live training script: send a command and block the training
step until the trainer's SDK holds it, so the step boundary right after takes it (deterministic)."""

from __future__ import annotations

import time
from typing import Any

import httpx

API = "/api/v1"


def listed(url: str, run: str) -> dict[str, dict[str, Any]]:
    """The run's commands by id, as the public reads them."""
    return {c["command"]: c for c in httpx.get(f"{url}{API}/runs/{run}/commands").json()["commands"]}


def deliver(url: str, token: str, run: Any, body: dict[str, Any]) -> str:
    """Send ``body`` as the team to ``run`` (the script's open ``runcast.Run``); return once its SDK holds it.

    Under load an answer can time out after the server marked the command delivered: the SDK then gets it
    with a later answer, and each flush sends one."""
    run.flush()  # the tunables declared at train start are on the server
    res = httpx.post(f"{url}{API}/runs/{run.id}/commands", json={"reason": "because", **body},
                     headers={"Authorization": f"Bearer {token}"})
    assert res.status_code == 201, res.text
    uid: str = res.json()["command"]
    deadline = time.monotonic() + 120  # a failure's bound, not a timing
    while uid not in run._inbox._seen:  # received: handed to the script, or refused for one that did not opt in
        assert time.monotonic() < deadline, f"never delivered: {listed(url, run.id)[uid]}"
        run.flush(timeout=5)
    return uid
