"""Data sent over POST /api/v1/ingest (embedded mode: the task runs eagerly) reads back exactly."""

from __future__ import annotations

import json
import math

from runcast.wire import events as ev


def test_ingest_over_http_then_read_everything(client, seed, auth):
    token = seed.token("http")
    run, segment = ev.new_id(), ev.new_id()
    seq = iter(range(100))

    def event(kind, **fields):
        return {
            "v": 1,
            "type": kind,
            "run": run,
            "segment": segment,
            "seq": next(seq),
            "ts": 1000.0,
            **fields,
        }

    batch = [
        event(
            "run_started",
            project="http",
            name="over-http",
            visibility="unlisted",
            config={"bs": 8},
        ),
        *(event("metrics", step=s, values={"loss": 4.0 - s / 100}) for s in range(40)),
        event("metrics", step=40, values={"loss": "NaN", "gnorm": "Infinity"}),
        event("note", step=40, text="diverged"),
        event("finished", step=40, status="failed"),
    ]
    res = client.post(
        "/api/v1/ingest", content=ev.dumps_batch(batch), headers=auth(token)
    )
    assert res.status_code == 202, res.text

    assert client.get("/api/v1/runs").json()["runs"] == []  # unlisted
    detail = client.get(f"/api/v1/runs/{run}").json()
    assert (detail["status"], detail["last_step"], detail["keys"]) == (
        "failed",
        40,
        ["gnorm", "loss"],
    )
    assert detail["last_values"] == {
        "loss": {"step": 40, "value": "NaN"},
        "gnorm": {"step": 40, "value": "Infinity"},
    }
    metrics = client.get(
        f"/api/v1/runs/{run}/metrics", params={"key": "loss", "max_points": 5}
    ).json()
    (series,) = metrics["series"]
    assert (metrics["level"], series["step"]) == (4, [0, 16, 32])
    assert series["count"] == [16, 16, 8]
    assert series["last"] == [4.0 - 15 / 100, 4.0 - 31 / 100, "NaN"]
    notes = client.get(f"/api/v1/runs/{run}/events", params={"type": "note"}).json()[
        "events"
    ]
    assert [e["payload"] for e in notes] == [{"text": "diverged"}]
    lines = client.get(
        f"/api/v1/runs/{run}/export", params={"key": "loss"}
    ).text.splitlines()
    assert len(lines) == 41
    assert json.loads(lines[-1]) == {
        "segment": 0,
        "key": "loss",
        "step": 40,
        "value": "NaN",
        "time": 1000.0,  # every event's ts: the step's time
    }
    assert all(math.isfinite(json.loads(line)["value"]) for line in lines[:-1])
