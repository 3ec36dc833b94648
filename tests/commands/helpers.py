"""A trainer's side of the wire for the commands tests: batches it posts and the answers it reads."""

from __future__ import annotations

import itertools
import time
from typing import Any

API = "/api/v1"
TUNABLES = {"lr_scale": {"default": 1.0, "min": 0.1, "max": 4.0}}


class Trainer:
    """Posts ``run``'s events with ``token``; ``seq`` counts per segment as the SDK's does."""

    def __init__(self, client: Any, token: str, run: str, segment: str = "segment01") -> None:
        self.client, self.token, self.run, self.segment = client, token, run, segment
        self._seq = itertools.count()

    def post(self, *events: dict[str, Any]) -> Any:
        body = {"v": 1, "events": [{"v": 1, "run": self.run, "segment": self.segment, "seq": next(self._seq),
                                    "ts": time.time(), **e} for e in events]}
        self.last = body
        return self.resend()

    def resend(self) -> Any:
        """The last batch again, as the SDK resends one whose answer it did not get."""
        return self.client.post(f"{API}/ingest", json=self.last, headers={"Authorization": f"Bearer {self.token}"})

    def start(self, visibility: str = "public", policy: dict[str, Any] | None = None) -> Any:
        started: dict[str, Any] = {"type": "run_started", "name": "cmd run", "config": {"_tunables": TUNABLES},
                                   "code": {}, "env": {}, "seed": None, "resume_step": None, "visibility": visibility}
        if policy:
            started["policy"] = policy
        return self.post(started)

    def step(self, step: int) -> Any:
        return self.post({"type": "metrics", "step": step, "values": {"loss": 1.0 / step}})

    def ack(self, command: str, step: int | None, outcome: str = "applied", message: str = "") -> Any:
        return self.post({"type": "command_ack", "command": command, "step": step, "outcome": outcome,
                          "message": message})
