"""The publication policy from the reader's seat: every kind of data on every read path, for an
anonymous reader, another project's token and the team's token, under each setting, and a
policy changed during the run (embedded app; data sent through POST /api/v1/ingest)."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import pytest
from runcast.wire import events as ev
from runcast.wire.policy import DEFAULT

WITHHOLD_ALL = {"metrics": ["train/*"], "config": ["lr"], "env": "hidden", "code": "sha", "data_mix": "hidden",
                "manifests": "summary", "notes": "hidden", "checkpoints": "metadata", "alerts": "team"}
CKPT_BYTES = b"weights" * 100


class Trainer:
    """One run sent over HTTP as the SDK would send it."""

    def __init__(self, client: Any, token: str, project: str = "team") -> None:
        self.client, self.token, self.project = client, token, project
        self.run, self.segment, self.seq = ev.new_id(), ev.new_id(), 0

    def send(self, *items: tuple[str, dict[str, Any]]) -> None:
        batch = []
        for kind, fields in items:
            batch.append({"v": ev.SCHEMA_VERSION, "type": kind, "run": self.run, "segment": self.segment,
                          "seq": self.seq, "ts": time.time(), **fields})
            self.seq += 1
        r = self.client.post("/api/v1/ingest", json={"v": 1, "events": batch},
                             headers={"Authorization": f"Bearer {self.token}"})
        assert r.status_code == 202, r.text

    def start(self, **extra: Any) -> Trainer:
        self.send(("run_started", {"project": self.project, "name": "p", "config": {"lr": 0.1, "secret_mix": "x"},
                                   "code": {"sha": "abc123", "branch": "main", "dirty": True, "diff": "+x = 1\n"},
                                   "env": {"python": "3.11"}, "seed": 1, "resume_step": None,
                                   "visibility": "public", **extra}))
        return self

    def log(self, step: int, values: dict[str, float]) -> None:
        self.send(("metrics", {"step": step, "values": values}))


@pytest.fixture
def team(settings: Any, client: Any, seed: Any) -> dict[str, Any]:

    storage_root = settings.checkpoint_root
    token, other = seed.token("team"), seed.token("rivals")
    t = Trainer(client, token).start()
    for step in range(3):
        t.log(step, {"train/loss": 3.0 - step, "val/loss": 4.0 - step})
    ckpt = storage_root / "team" / "ck.pt"
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    ckpt.write_bytes(CKPT_BYTES)
    t.send(("checkpoint", {"step": 2, "path": str(ckpt), "size": len(CKPT_BYTES),
                           "sha256": hashlib.sha256(CKPT_BYTES).hexdigest(), "metrics": {"val/loss": 2.0},
                           "public": True, "status": "available"}),
           ("data_mix", {"step": 0, "weights": {"web": 0.7, "code": 0.3}}),
           ("manifest", {"step": 0, "version": "v1", "manifest": {"sources": {"web": {"files": [
               {"name": "web-000.jsonl", "size": 10}]}}, "preview": "a sample row"}}),
           ("note", {"step": 1, "text": "lr warm-up done"}))
    return {"t": t, "run": t.run, "token": token, "other": other}


def _readers(team: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {"anonymous": {}, "other": {"Authorization": f"Bearer {team['other']}"},
            "team": {"Authorization": f"Bearer {team['token']}"}}


def _put(client: Any, team: dict[str, Any], body: Any, token: str | None = None) -> Any:
    return client.put(f"/api/v1/runs/{team['run']}/policy", json=body,
                      headers={"Authorization": f"Bearer {token or team['token']}"})


def _snapshot(client: Any, run: str, headers: dict[str, str]) -> dict[str, Any]:
    """What one reader gets from every read path of the run."""
    get = lambda path, **kw: client.get(f"/api/v1/runs/{run}{path}", headers=headers, **kw)  # noqa: E731
    detail = get("").json()
    listed = next(r for r in client.get("/api/v1/runs", headers=headers).json()["runs"] if r["id"] == run)
    events = get("/events").json()["events"]
    ckpts = get("/checkpoints").json()
    cid = ckpts["checkpoints"][0]["id"] if ckpts["checkpoints"] else 1
    export = get("/export", params={"format": "jsonl"}).text.splitlines()
    return {
        "config": detail["config"], "env": detail["env"], "code": detail["code"], "keys": detail["keys"],
        "last_values": sorted(listed["last_values"]), "publication": detail["publication"],
        "train_metrics": get("/metrics", params={"key": "train/loss"}).status_code,
        "val_metrics": get("/metrics", params={"key": "val/loss"}).status_code,
        "export_keys": sorted({json.loads(line)["key"] for line in export}),
        "export_train": get("/export", params={"key": "train/loss"}).status_code,
        "event_types": sorted({e["type"] for e in events}),
        "manifest_event": next((e["payload"] for e in events if e["type"] == "manifest"), None),
        "checkpoints": len(ckpts["checkpoints"]),
        "download": get(f"/checkpoints/{cid}/download").status_code,
        "card": get(f"/checkpoints/{cid}/card").status_code,
        "manifests": get("/manifests").status_code,
        "manifest": get("/manifests/v1").status_code,
        "data_mix": get("/data-mix").status_code,
        "revisions": get("/revisions").status_code,
        "plot": get("/plot.svg", params={"key": "train/loss"}).status_code,
        "badge_has_value": "–" not in client.get(f"/badge/runs/{run}.svg", params={"key": "train/loss"},
                                                 headers=headers).text,
    }


EVERYTHING = {
    "config": {"lr": 0.1, "secret_mix": "x"}, "env": {"python": "3.11"},
    "code": {"sha": "abc123", "branch": "main", "dirty": True, "diff": "+x = 1\n"},
    "keys": ["train/loss", "val/loss"], "last_values": ["train/loss", "val/loss"],
    "train_metrics": 200, "val_metrics": 200, "export_keys": ["train/loss", "val/loss"], "export_train": 200,
    "event_types": ["checkpoint", "data_mix", "manifest", "note", "run_started"],
    "checkpoints": 1, "download": 200, "card": 200, "manifests": 200, "manifest": 200, "data_mix": 200,
    "revisions": 200, "plot": 200, "badge_has_value": True,
}


def _without(snap: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in snap.items() if k not in names}


def test_default_policy_publishes_everything_to_everyone(client, team):
    for who, headers in _readers(team).items():
        snap = _snapshot(client, team["run"], headers)
        assert _without(snap, "publication", "manifest_event") == EVERYTHING, who
        assert snap["publication"] == {"policy": DEFAULT, "withheld": {}}


def test_each_setting_withholds_only_from_the_public(client, team):
    r = _put(client, team, WITHHOLD_ALL)
    assert r.status_code == 200, r.text
    assert r.json()["policy"] == {**DEFAULT, **WITHHOLD_ALL}
    public = {
        "config": {"lr": 0.1}, "env": {}, "code": {"sha": "abc123", "branch": "main", "dirty": True},
        "keys": ["train/loss"], "last_values": ["train/loss"], "train_metrics": 200, "val_metrics": 404,
        "export_keys": ["train/loss"], "export_train": 200,
        "event_types": ["checkpoint", "manifest", "run_started"],
        "checkpoints": 1, "download": 404, "card": 200, "manifests": 200, "manifest": 404, "data_mix": 404,
        "revisions": 200, "plot": 200, "badge_has_value": True,
    }
    for who in ("anonymous", "other"):
        snap = _snapshot(client, team["run"], _readers(team)[who])
        assert _without(snap, "publication", "manifest_event") == public, who
        assert snap["manifest_event"] == {"summary": True, "version": "v1", "sources": 1}
        assert snap["publication"]["withheld"] == WITHHOLD_ALL
    snap = _snapshot(client, team["run"], _readers(team)["team"])
    assert _without(snap, "publication", "manifest_event") == EVERYTHING
    assert snap["publication"]["withheld"] == WITHHOLD_ALL  # the team sees what the public is shown


def test_nothing_settings(client, team):
    assert _put(client, team, {"metrics": "none", "config": "none", "code": "none", "checkpoints": "none",
                               "manifests": "none"}).status_code == 200
    snap = _snapshot(client, team["run"], {})
    assert (snap["config"], snap["code"], snap["keys"], snap["last_values"]) == ({}, {}, [], [])
    assert (snap["train_metrics"], snap["val_metrics"], snap["export_keys"], snap["plot"]) == (404, 404, [], 404)
    assert snap["event_types"] == ["data_mix", "note", "run_started"]
    assert (snap["checkpoints"], snap["download"], snap["card"]) == (0, 404, 404)
    assert (snap["manifests"], snap["manifest"], snap["revisions"]) == (404, 404, 404)
    assert snap["badge_has_value"] is False
    # A withheld key answers exactly as a key the run never logged.
    hidden = client.get(f"/api/v1/runs/{team['run']}/metrics", params={"key": "train/loss"})
    unknown = client.get(f"/api/v1/runs/{team['run']}/metrics", params={"key": "nope"})
    assert hidden.json()["error"]["field"] == unknown.json()["error"]["field"] == "key"
    assert _without(_snapshot(client, team["run"], _readers(team)["team"]), "publication", "manifest_event") == EVERYTHING


def test_policy_changed_mid_run(client, team):
    t, run = team["t"], team["run"]
    assert _put(client, team, {"metrics": ["val/*"]}).status_code == 200
    for step in range(3, 6):
        t.log(step, {"train/loss": 1.0 / step, "val/loss": 2.0 / step})
    assert client.get(f"/api/v1/runs/{run}/metrics", params={"key": "train/loss"}).status_code == 404
    # Made public later: its whole history appears at once.
    assert _put(client, team, {"metrics": "all"}).status_code == 200
    answer = client.get(f"/api/v1/runs/{run}/metrics", params={"key": "train/loss"}).json()
    assert answer["series"][0]["step"] == [0, 1, 2, 3, 4, 5]
    # Withdrawn: gone from new reads.
    assert _put(client, team, {"metrics": ["train/*"]}).status_code == 200
    assert client.get(f"/api/v1/runs/{run}/metrics", params={"key": "val/loss"}).status_code == 404
    assert "val/loss" not in client.get(f"/api/v1/runs/{run}").json()["keys"]


def test_project_default_and_run_override(client, team):
    headers = {"Authorization": f"Bearer {team['token']}"}
    r = client.put("/api/v1/projects/team/policy", json={"notes": "hidden", "config": "none"}, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["project_settings"] == {"notes": "hidden", "config": "none"}
    assert _snapshot(client, team["run"], {})["config"] == {}
    r = _put(client, team, {"config": "all"})  # the run overrides the project's default
    assert r.json()["policy"]["config"] == "all" and r.json()["policy"]["notes"] == "hidden"
    snap = _snapshot(client, team["run"], {})
    assert snap["config"] == {"lr": 0.1, "secret_mix": "x"} and "note" not in snap["event_types"]
    r = _put(client, team, {"config": None})  # null: back to the project's default
    assert r.json()["run_settings"] == {} and r.json()["policy"]["config"] == "none"
    assert client.get("/api/v1/projects/team/policy", headers=headers).json()["policy"]["notes"] == "hidden"


def test_init_policy_is_stored_with_the_run(client, seed):
    token = seed.token("team")
    t = Trainer(client, token).start(policy={"metrics": ["loss"], "notes": "hidden"})
    t.log(0, {"loss": 1.0, "grad_norm": 2.0})
    detail = client.get(f"/api/v1/runs/{t.run}").json()
    assert detail["keys"] == ["loss"] and detail["publication"]["withheld"] == {"metrics": ["loss"], "notes": "hidden"}
    got = client.get(f"/api/v1/runs/{t.run}/policy", headers={"Authorization": f"Bearer {token}"}).json()
    assert got["run_settings"] == {"metrics": ["loss"], "notes": "hidden"}


@pytest.mark.parametrize(("body", "field"), [
    ({"metrics": 3}, "policy.metrics"), ({"code": "all"}, "policy.code"), ({"colour": "red"}, "policy.colour"),
    ({"checkpoints": "yes"}, "policy.checkpoints"), ({"metrics": ["ok", ""]}, "policy.metrics"), ([1], "policy"),
    # JSON values only: a command line's text ("train/*,loss", "90") is converted before it is sent
    ({"metrics": "train/*,loss"}, "policy.metrics"), ({"delay_s": "90"}, "policy.delay_s"),
])
def test_bad_policy_is_a_422_naming_the_field_and_changes_nothing(client, team, body, field):
    r = _put(client, team, body)
    assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text
    got = client.get(f"/api/v1/runs/{team['run']}/policy", headers={"Authorization": f"Bearer {team['token']}"})
    assert got.json()["run_settings"] == {}
    r = client.put("/api/v1/projects/team/policy", json=body, headers={"Authorization": f"Bearer {team['token']}"})
    assert r.status_code == 422 and r.json()["error"]["field"] == field


def test_policy_routes_are_the_team_s_only(client, team):
    run = team["run"]
    for method in ("get", "put"):
        kw = {"json": {"notes": "hidden"}} if method == "put" else {}
        assert getattr(client, method)(f"/api/v1/runs/{run}/policy", **kw).status_code == 401
        other = getattr(client, method)(f"/api/v1/runs/{run}/policy", headers={"Authorization": f"Bearer {team['other']}"}, **kw)
        unknown = getattr(client, method)("/api/v1/runs/nosuchrun1/policy", headers={"Authorization": f"Bearer {team['other']}"}, **kw)
        assert other.status_code == unknown.status_code == 404 and other.json() == unknown.json()
        proj = getattr(client, method)("/api/v1/projects/team/policy", headers={"Authorization": f"Bearer {team['other']}"}, **kw)
        assert proj.status_code == 404
    assert _snapshot(client, run, {})["event_types"] == EVERYTHING["event_types"]  # nothing changed


def test_alerts_team_only(db: Any, client, team):
    from runcast_server.alerts.models import Alert

    with db.scope() as session:
        session.add(Alert(run_id=team["run"], segment_id=None, kind="stall", key="", state="open", opened_at=time.time(),
                          step=2, evidence={}))
    run = team["run"]
    assert len(client.get(f"/api/v1/runs/{run}/alerts").json()["alerts"]) == 1
    assert _put(client, team, {"alerts": "team"}).status_code == 200
    for who, headers in _readers(team).items():
        body = client.get(f"/api/v1/runs/{run}/alerts", headers=headers).json()
        feed = client.get(f"/api/v1/runs/{run}/alerts.atom", headers=headers).text
        assert len(body["alerts"]) == (1 if who == "team" else 0), who
        assert body["withheld"] is (who != "team")
        assert feed.count("<entry>") == (1 if who == "team" else 0), who
    assert client.get("/api/v1/projects/team/alerts.atom").text.count("<entry>") == 0
