"""``read_versions`` on SQLite and PostgreSQL: the run_versions log written by store_batch,
read back as stream messages by primary-key range scans."""

from __future__ import annotations

from typing import Any

from runcast.wire import events as ev
from runcast_server.core.auth import get_or_create_project
from runcast_server.ingest.store import store_batch
from runcast_server.live.replay import _scan_groups, read_versions
from runcast_server.record.models import RunVersion
from sqlalchemy import Engine, delete
from sqlalchemy.orm import Session


class Writer:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        with Session(engine) as s:
            self.project_id = get_or_create_project(s, "demo").id
            s.commit()
        self.run, self.segment, self.seq = "run_replay01", "seg_replay01", 0

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        raw = {"v": 1, "type": kind, "run": self.run, "segment": self.segment, "seq": self.seq, "ts": 1.0e9 + self.seq, **fields}
        self.seq += 1
        return ev.validate_event(raw)

    def send(self, *events: dict[str, Any]) -> None:
        with Session(self.engine) as s:
            store_batch(s, self.project_id, list(events), received_at=2.0e9)
            s.commit()

    def metrics(self, steps: range, note: str | None = None) -> None:
        batch = [self.event("metrics", step=st, values={"loss": "NaN" if st == 4 else st / 10, "lr": 0.5}) for st in steps]
        if note:
            batch.append(self.event("note", text=note, step=steps[-1]))
        self.send(*batch)


def test_versions_replayed_exactly_as_written(engine: Engine) -> None:
    w = Writer(engine)
    w.send(w.event("run_started", project="demo", name="r"))  # version 1
    w.metrics(range(5), note="first")  # 2
    w.metrics(range(5, 8))  # 3
    w.metrics(range(20, 22))  # 4
    w.metrics(range(10, 12))  # 5: steps go back (a late batch): a second scan range
    w.send(w.event("metrics", step=3, values={"loss": 9.0}))  # a repeat: nothing new, no version
    with Session(engine) as s:
        replay = read_versions(s, w.run, 0)
        assert replay.current == 5 and replay.messages is not None
        msgs = replay.messages
        assert [m["version"] for m in msgs] == [1, 2, 3, 4, 5]
        assert [e["type"] for e in msgs[0]["events"]] == ["run_started"] and msgs[0]["points"] == []
        times, *logged = msgs[1]["points"]  # the server's step times ride along with the points
        assert (times["key"], times["step"]) == ("_timestamp", [0, 1, 2, 3, 4])
        assert logged == [
            {"key": "loss", "segment": 0, "step": [0, 1, 2, 3, 4], "value": [0.0, 0.1, 0.2, 0.3, "NaN"]},
            {"key": "lr", "segment": 0, "step": [0, 1, 2, 3, 4], "value": [0.5] * 5},
        ]
        notes = [(e["segment"], e["step"], e["payload"]) for m in msgs for e in m["events"] if e["type"] == "note"]
        assert notes == [(0, 4, {"text": "first"})] and any(e["type"] == "note" for e in msgs[1]["events"])
        assert [p["step"] for p in msgs[4]["points"] if p["key"] != "_timestamp"] == [[10, 11], [10, 11]]
        assert [(m["status"], m["last_step"]) for m in msgs] == [("running", None), ("running", 4), ("running", 7), ("running", 21), ("running", 21)]
        assert [m["version"] for m in read_versions(s, w.run, 3).messages or []] == [4, 5]
        assert read_versions(s, w.run, 5).messages == []
        # Resets: too many versions, too many points, a position ahead of the run, a hole in the log.
        assert read_versions(s, w.run, 0, max_versions=4).messages is None
        # 10 + 6 + 4 + 4 logged points, and the steps' times that ride with them (_timestamp)
        total = sum(len(p["step"]) for m in msgs[1:] for p in m["points"])
        assert total > 24
        assert read_versions(s, w.run, 1, max_points=total - 1).messages is None
        assert read_versions(s, w.run, 1, max_points=total).messages is not None
        assert read_versions(s, w.run, 6).messages is None
        s.execute(delete(RunVersion).where(RunVersion.version == 3))
        s.commit()
        assert read_versions(s, w.run, 1).messages is None
        assert [m["version"] for m in read_versions(s, w.run, 3).messages or []] == [4, 5]


def test_scan_groups_merge_forward_ranges_only() -> None:
    logs = [
        RunVersion(version=1, ranges=[[7, 0, 4, 5], [8, 0, 4, 5]]),
        RunVersion(version=2, ranges=[[7, 5, 9, 5]]),
        RunVersion(version=3, ranges=[[7, 2, 3, 2]]),
        RunVersion(version=4, ranges=[[7, 10, 12, 3]]),
    ]
    assert _scan_groups(logs) == [(7, 0, 9), (7, 2, 12), (8, 0, 4)]
