"""The broadcast delay from the reader's seat (embedded app; data sent through POST /api/v1/ingest):
anonymous readers and another project's token see the run as it was ``delay_s`` ago on every
read path, the team sees it live, and lifting the delay publishes the held back history at once."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from runcast.wire.policy import DEFAULT, PolicyError, check_policy

from api.test_policy import Trainer, _put, _readers

DELAY = 5.0  # the checks after a batch must finish within it: 2 s ran out on a loaded machine


def _wait_due() -> None:
    time.sleep(DELAY + 0.3)


def _view(client: Any, run: str, headers: dict[str, str]) -> dict[str, Any]:
    """What one reader gets of the run's progress on every read path."""
    def get(path: str, **kw: Any) -> Any:
        return client.get(f"/api/v1/runs/{run}{path}", headers=headers, **kw)

    detail = get("").json()
    listed = next(r for r in client.get("/api/v1/runs", headers=headers).json()["runs"] if r["id"] == run)
    metrics = get("/metrics", params={"key": "loss"})
    export = [json.loads(line) for line in get("/export", params={"format": "jsonl"}).text.splitlines()]
    badge = client.get(f"/badge/runs/{run}.svg", params={"key": "loss"}, headers=headers).text
    return {
        "status": detail["status"], "listed_status": listed["status"],
        "last_step": detail["last_step"], "listed_last_step": listed["last_step"],
        "last_loss": (detail["last_values"].get("loss") or {}).get("step"),
        "keys": detail["keys"],
        "segment_last_step": detail["segments"][0]["last_step"] if detail["segments"] else None,
        "metric_steps": metrics.json()["series"][0]["step"] if metrics.status_code == 200 else metrics.status_code,
        "fresh_metric": get("/metrics", params={"key": "fresh"}).status_code,
        "export_steps": sorted({(e["key"], e["step"]) for e in export}),
        "notes": [e["payload"]["text"] for e in get("/events").json()["events"] if e["type"] == "note"],
        "checkpoints": [c["step"] for c in get("/checkpoints").json()["checkpoints"]],
        "badge_step": next((s for s in range(20, -1, -1) if f"step {s}" in badge), None),
    }


def _progress(t: Trainer, steps: range, *, note: str, fresh: bool = False) -> None:
    for step in steps:
        t.log(step, {"loss": 10.0 - step, **({"fresh": 1.0} if fresh else {})})
    t.send(("note", {"step": steps[-1], "text": note}),
           ("checkpoint", {"step": steps[-1], "path": f"/ck/{steps[-1]}.pt", "size": 1, "public": True,
                           "status": "available"}))


@pytest.fixture
def delayed(client: Any, seed: Any) -> dict[str, Any]:
    """A run whose steps 0-2 are due and steps 3-5 (a new key ``fresh`` among them) held back."""
    token, other = seed.token("team"), seed.token("rivals")
    t = Trainer(client, token).start()
    team = {"t": t, "run": t.run, "token": token, "other": other}
    r = _put(client, team, {"delay_s": DELAY})
    assert r.status_code == 200, r.text
    assert r.json()["policy"] == {**DEFAULT, "delay_s": 5}
    _progress(t, range(3), note="early")
    _wait_due()
    _progress(t, range(3, 6), note="late", fresh=True)
    t.send(("finished", {"status": "finished", "step": 5}))
    return team


EARLY = {
    "status": "running", "listed_status": "running", "last_step": 2, "listed_last_step": 2, "last_loss": 2,
    "keys": ["loss"], "segment_last_step": 2, "metric_steps": [0, 1, 2], "fresh_metric": 404,
    "export_steps": [("loss", 0), ("loss", 1), ("loss", 2)], "notes": ["early"], "checkpoints": [2],
    "badge_step": 2,
}
LIVE = {
    "status": "finished", "listed_status": "finished", "last_step": 5, "listed_last_step": 5, "last_loss": 5,
    "keys": ["fresh", "loss"], "segment_last_step": 5, "metric_steps": [0, 1, 2, 3, 4, 5], "fresh_metric": 200,
    "export_steps": sorted([("loss", s) for s in range(6)] + [("fresh", s) for s in range(3, 6)]),
    "notes": ["early", "late"], "checkpoints": [2, 5], "badge_step": 5,
}


def _read_version(client: Any, run: str, headers: dict[str, str]) -> int:
    """The run version the run's read, its events and a metric's read each name: one, the same."""
    named = {client.get(f"/api/v1/runs/{run}{path}", headers=headers, params=params).json()["version"]
             for path, params in (("", {}), ("/events", {}), ("/metrics", {"key": "loss"}))}
    assert len(named) == 1, named
    return named.pop()


def test_public_sees_the_run_as_it_was_delay_ago_the_team_live(client, delayed):
    readers = _readers(delayed)
    # Each read names the version it reflects, where a page following the run joins (docs/live.md);
    # first, while the late batches are surely not due (the views below take seconds on a loaded machine).
    early_version = _read_version(client, delayed["run"], readers["anonymous"])
    team_version = _read_version(client, delayed["run"], readers["team"])
    assert early_version < team_version
    for who in ("anonymous", "other"):
        assert _view(client, delayed["run"], readers[who]) == EARLY, who
    assert _view(client, delayed["run"], readers["team"]) == LIVE
    detail = client.get(f"/api/v1/runs/{delayed['run']}").json()
    assert detail["publication"]["withheld"] == {"delay_s": 5}  # the run page names the delay
    finished = [r["id"] for r in client.get("/api/v1/runs", params={"status": "finished"}).json()["runs"]]
    assert delayed["run"] not in finished  # it finished less than delay ago
    assert delayed["run"] in [r["id"] for r in client.get("/api/v1/runs", params={"status": "finished"},
                                                          headers=readers["team"]).json()["runs"]]
    _wait_due()  # the held back batches come due
    for who in ("anonymous", "other"):
        assert _view(client, delayed["run"], readers[who]) == LIVE, who
    assert _read_version(client, delayed["run"], readers["anonymous"]) == team_version


def test_lifting_the_delay_publishes_the_held_back_history_at_once(client, delayed):
    assert _view(client, delayed["run"], {}) == EARLY
    assert _put(client, delayed, {"delay_s": 0}).status_code == 200
    assert _view(client, delayed["run"], {}) == LIVE
    assert _put(client, delayed, {"delay_s": 3600}).status_code == 200  # set again: the last hour withheld
    assert _view(client, delayed["run"], {})["metric_steps"] == 404  # nothing of it was stored an hour ago
    assert _put(client, delayed, {"delay_s": None}).status_code == 200  # back to the default (live)
    assert _view(client, delayed["run"], {}) == LIVE


def test_buckets_of_a_delayed_run_are_its_answer_of_delay_ago(client, seed):
    """A zoomed-out read merges rollups below the held back points and raw due points above them:
    the public answer now equals the team's answer of ``delay`` ago, exactly (version included)."""
    token = seed.token("team")
    t = Trainer(client, token).start()
    run = {"run": t.run, "token": token}
    assert _put(client, run, {"delay_s": DELAY}).status_code == 200
    for step in range(0, 41, 4):
        t.send(*[("metrics", {"step": s, "values": {"loss": float(s % 7) - 2.5}}) for s in range(step, step + 4)])
    params = {"key": "loss", "start": 0, "end": 127, "max_points": 4}
    raw = {"key": "loss", "max_points": 44}  # the 44 due points fit raw; with the held back ones they do not
    team = {"Authorization": f"Bearer {token}"}
    _wait_due()
    before = client.get(f"/api/v1/runs/{t.run}/metrics", params=params, headers=team).json()
    before_raw = client.get(f"/api/v1/runs/{t.run}/metrics", params=raw, headers=team).json()
    assert before["level"] > 0 and before_raw["level"] == 0
    t.send(*[("metrics", {"step": s, "values": {"loss": 100.0 + s}}) for s in range(44, 90)])
    t.send(("metrics", {"step": 90, "values": {"loss": -50.0}}))
    now_team = client.get(f"/api/v1/runs/{t.run}/metrics", params=params, headers=team).json()
    assert now_team != before
    assert client.get(f"/api/v1/runs/{t.run}/metrics", params=params).json() == before
    assert client.get(f"/api/v1/runs/{t.run}/metrics", params=raw, headers=team).json()["level"] > 0
    assert client.get(f"/api/v1/runs/{t.run}/metrics", params=raw).json() == before_raw
    export = client.get(f"/api/v1/runs/{t.run}/export", params={"format": "csv"}).text.splitlines()
    assert len(export) == 1 + 44


@pytest.mark.parametrize("bad", [-1, 604_801, "soon", True, float("nan"), [1]])
def test_delay_is_checked_and_named(client, seed, bad):
    token = seed.token("team")
    t = Trainer(client, token).start()
    r = client.put(f"/api/v1/runs/{t.run}/policy", content=json.dumps({"delay_s": bad}).replace("NaN", '"NaN"'),
                   headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "policy.delay_s"


def test_sdk_and_cli_accept_the_delay():
    assert check_policy({"delay_s": 90}) == {"delay_s": 90}
    assert check_policy({"delay_s": "1.5"}) == {"delay_s": 1.5}  # from a command line
    assert check_policy({"delay_s": None}) == {"delay_s": None}
    with pytest.raises(PolicyError) as exc:
        check_policy({"delay_s": 604_800.5})
    assert exc.value.field == "policy.delay_s"


def test_alerts_of_a_delayed_run_as_they_were_and_not_sent(db: Any, client, seed):
    from runcast_server.alerts.models import Alert
    from runcast_server.policy.apply import public_policy
    from runcast_server.record.models import Run

    token, other = seed.token("team"), seed.token("rivals")
    t = Trainer(client, token).start()
    team = {"run": t.run, "token": token, "other": other}
    assert _put(client, team, {"delay_s": DELAY}).status_code == 200
    with db.scope() as session:
        alert = Alert(run_id=t.run, segment_id=None, kind="stall", key="", state="open", opened_at=time.time(),
                      step=2, evidence={})
        session.add(alert)
        session.flush()
        alert_id = alert.id

    def seen(headers: dict[str, str]) -> tuple[list[str], int]:
        body = client.get(f"/api/v1/runs/{t.run}/alerts", headers=headers).json()
        feed = client.get(f"/api/v1/runs/{t.run}/alerts.atom", headers=headers).text
        return [a["state"] for a in body["alerts"]], feed.count("<entry>")

    readers = _readers(team)
    assert seen(readers["team"]) == (["open"], 1)
    assert seen(readers["anonymous"]) == seen(readers["other"]) == ([], 0)  # opened less than delay ago
    assert client.get("/api/v1/projects/team/alerts.atom").text.count("<entry>") == 0
    _wait_due()
    with db.scope() as session:
        row = session.get(Alert, alert_id)
        row.state, row.closed_at, row.end_step = "closed", time.time(), 3
    assert seen(readers["team"]) == (["closed"], 1)
    assert seen(readers["anonymous"]) == seen(readers["other"]) == (["open"], 1)  # closed less than delay ago
    with db.scope() as session:  # subscribers are the public: a delayed run's alerts are not sent
        assert public_policy(session, t.run).notified({"key": ""}) is False
        assert session.get(Run, t.run) is not None
    assert _put(client, team, {"delay_s": 0}).status_code == 200
    assert seen(readers["anonymous"]) == (["closed"], 1)
    with db.scope() as session:
        assert public_policy(session, t.run).notified({"key": ""}) is True
