"""Fixtures for the importer tests: the embedded app as the import target, and ways to read it back.

``hub.load(sources)`` runs the importer's own pipeline (read, plan, send) against the
real ingest route of the embedded app (SQLite, eager tasks) through the app's test
client, so what is checked is what the server stored. CLI tests start ``runcast serve``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import services
from runcast import importers
from runcast.handshake import identity
from runcast.importers.plan import Plan
from runcast.sender.transport import Rejected, Retryable
from runcast_server.core.auth import create_token

from importers.tools import run_python


class AppTransport:
    """A runcast Transport that posts to the app through its TestClient (``fail_after``: batches, then 503)."""

    def __init__(self, client: Any, token: str, fail_after: int | None = None) -> None:
        self.client = client
        self.url = "testclient"
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.fail_after = fail_after
        self.batches = 0
        self.sent: list[dict[str, Any]] = []  # every event of every batch the app took
        self.bodies: list[bytes] = []  # every body the app took

    def send(self, body: bytes, events: list[dict[str, Any]], timeout: float) -> None:
        if self.fail_after is not None and self.batches >= self.fail_after:
            raise Retryable("HTTP 503: down for the test")
        response = self.client.post("/api/v1/ingest", content=body, headers=self.headers)
        if response.status_code >= 300:
            raise Rejected(f"HTTP {response.status_code}: {response.text}", response.status_code)
        self.batches += 1
        self.bodies.append(body)
        self.sent.extend(events)

    def close(self) -> None:
        pass


class AppBlobs:
    """Images to the app through its TestClient: ``HEAD``, then ``PUT`` what it lacks (``runcast.sender.blob_http``'s calls)."""

    def __init__(self, client: Any, token: str) -> None:
        self.client = client
        self.url = "testclient"
        self.headers = {"Authorization": f"Bearer {token}"}
        self.put: list[str] = []  # the SHA-256 of every image sent

    def store(self, run: str, sha256: str, data: bytes, content_type: str) -> bool:
        path = f"/api/v1/runs/{run}/blobs/{sha256}"
        if self.client.head(path, headers=self.headers).status_code == 200:
            return False
        response = self.client.put(path, content=data, headers={**self.headers, "Content-Type": content_type})
        if response.status_code not in (200, 201):
            raise Rejected(f"HTTP {response.status_code}: {response.text}", response.status_code)
        self.put.append(sha256)
        return True


class Hub:
    """The embedded app seen by an importer and by a reader of the API."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._tokens: dict[str, str] = {}

    def token(self, project: str = "demo") -> str:
        if project not in self._tokens:
            with self.client.app.state.context.database.scope() as session:
                self._tokens[project] = create_token(session, project, label="tests")
        return self._tokens[project]

    def load(
        self,
        sources: Sequence[str | Path],
        *,
        fmt: str | None = None,
        project: str = "demo",
        name: str | None = None,
        options: importers.ReadOptions | None = None,
        transport: AppTransport | None = None,
        limits: importers.Limits | None = None,
        **target: Any,
    ) -> list[Plan]:
        """Import ``sources`` as ``runcast import`` does, in batches within ``limits`` (default: what the
        app's whoami says, as the command asks it: dense series as columns)."""
        runs = importers.read_all([str(s) for s in sources], fmt, options)
        plans = importers.plan_all(runs, importers.Target(project=project, **target), name=name)
        self.sent = transport or AppTransport(self.client, self.token(project))
        self.blobs = AppBlobs(self.client, self.token(project))
        if limits is None:
            who = self.client.get("/api/v1/whoami", headers=self.auth(project))
            limits = importers.Limits.of(identity(who.json()))
        importers.send(plans, self.sent, blobs=self.blobs, limits=limits, sleep=lambda s: None)
        return plans

    def outputs(self, plan: Plan) -> list[dict[str, Any]]:
        """The sample and media events the last ``load`` sent of ``plan``'s run, without the envelope's ``ts``."""
        return [{k: v for k, v in e.items() if k not in ("v", "ts")} for e in self.sent.sent
                if e["run"] == plan.run_id and e["type"] in ("sample", "media")]

    def auth(self, project: str = "demo") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(project)}"}

    def run(self, run_id: str) -> dict[str, Any]:
        response = self.client.get(f"/api/v1/runs/{run_id}", headers=self.auth())
        assert response.status_code == 200, response.text
        return response.json()

    def runs(self) -> list[dict[str, Any]]:
        return self.client.get("/api/v1/runs", params={"limit": 200}, headers=self.auth()).json()["runs"]

    def export(self, run_id: str, fmt: str = "jsonl") -> str:
        response = self.client.get(f"/api/v1/runs/{run_id}/export", params={"format": fmt}, headers=self.auth())
        assert response.status_code == 200, response.text
        return response.text

    def points(self, run_id: str) -> dict[tuple[int, str], list[tuple[int, float]]]:
        """(segment, key) -> [(step, value)] from the JSONL export ("NaN" etc. as floats)."""
        out: dict[tuple[int, str], list[tuple[int, float]]] = {}
        for line in self.export(run_id).splitlines():
            row = json.loads(line)
            value = row["value"] if not isinstance(row["value"], str) else float(row["value"].replace("Infinity", "inf"))
            out.setdefault((row["segment"], row["key"]), []).append((row["step"], value))
        return out

    def times(self, run_id: str) -> dict[tuple[int, int], float]:
        """(segment, step) -> the step's wall time, from the JSONL export's time column."""
        rows = (json.loads(line) for line in self.export(run_id).splitlines())
        return {(row["segment"], row["step"]): row["time"] for row in rows}

    def held(self, run_id: str, what: str) -> list[dict[str, Any]]:
        """The run's ``samples`` or ``media`` as the server's reads give them (one page of 1,000)."""
        response = self.client.get(f"/api/v1/runs/{run_id}/{what}", params={"limit": 1000}, headers=self.auth())
        assert response.status_code == 200, response.text
        return list(response.json()[what])

    def image(self, run_id: str, media: dict[str, Any]) -> bytes:
        """An image's bytes as the server serves them (``GET .../media/{id}/image``)."""
        response = self.client.get(f"/api/v1/runs/{run_id}/media/{media['id']}/image", headers=self.auth())
        assert response.status_code == 200, response.text
        return response.content

    def events(self, run_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        params = {"limit": 1000, **({"type": kind} if kind else {})}
        return self.client.get(f"/api/v1/runs/{run_id}/events", params=params, headers=self.auth()).json()["events"]


@pytest.fixture
def hub(embedded: Any) -> Hub:
    return Hub(embedded)


@pytest.fixture
def server(embedded_env: Path, tmp_path: Path) -> Iterator[str]:
    """``runcast serve`` (embedded SQLite) on the data dir the ``hub`` reads."""
    proc, url = services.start_api({"RUNCAST_DATA_DIR": str(embedded_env)}, tmp_path / "api.log")
    try:
        yield url
    finally:
        proc.stop()


WANDB_RUNS = """
import wandb
run = wandb.init(project="pretrain", name="baseline", config={"lr": 1e-3, "model": {"layers": 4}},
                 tags=["sweep-a", "fp32", "lr=1e-3,bs=32"], notes="first try")
run.config.update({"batch_size": 32})
run.summary["best/val"] = 2.41
run.summary.update({"final": {"acc": 0.9}, "label": "ok"})
for s in range(100):
    row = {"train/loss": 3.0 / (1 + s), "lr": 1e-3, "nested": {"depth": s}}
    if s % 10 == 0:
        row["val/loss"] = 2.5 - s / 1000
    if s == 50:
        row.update({"spike": float("nan"), "blowup": float("inf"), "comment": "text is left out"})
    run.log(row, step=s)
run.finish()

run = wandb.init(project="pretrain", id="resumed01", name="resumed", resume="allow")
for s in range(10):
    run.log({"loss": 1 - s / 100}, step=s)
run.finish(exit_code=1)
run = wandb.init(project="pretrain", id="resumed01", resume="allow")
for s in range(5, 15):
    run.log({"loss": 0.5 - s / 100}, step=s)
run.finish()
"""


@pytest.fixture(scope="session")
def wandb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two offline W&B runs written by the real ``wandb`` package (no network): ``baseline`` and ``resumed``."""
    root = tmp_path_factory.mktemp("wandb-runs")
    run_python(WANDB_RUNS, root, WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=str(root),
               WANDB_DISABLE_GIT="true", WANDB_API_KEY="")
    return root / "wandb"
