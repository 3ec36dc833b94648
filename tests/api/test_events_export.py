"""GET /runs/{id}/events and /runs/{id}/export (exact contents)."""

from __future__ import annotations

import json
import math
from typing import Any

from runcast_server.metrics.export import SeriesRef, export_chunks

API = "/api/v1/runs"


def make_timeline(seed):
    run = seed.run(name="timeline").start(ts=1000.0)
    run.send([run.event("metrics", step=1, values={"loss": 2.0}, ts=1001.0)])
    run.send([run.event("heartbeat", step=1, ts=1002.0)])
    run.send([run.event("note", step=1, text="<b>lr warmup done</b>", ts=1003.0)])
    run.send(
        [
            run.event(
                "checkpoint",
                step=2,
                path="ckpt/2.pt",
                size=10,
                sha256="a" * 64,
                metrics={"loss": math.nan},
                ts=1004.0,
            )
        ]
    )
    run.resume(2, ts=1005.0)
    run.send(
        [run.event("data_mix", step=3, weights={"web": 0.7, "code": 0.3}, ts=1006.0)]
    )
    run.send([run.event("note", step=4, text="second", ts=1007.0)])
    return run


def test_events_timeline_and_filters(client, seed):
    run = make_timeline(seed)
    body = client.get(f"{API}/{run.run}/events").json()
    events = body["events"]
    assert body["next_cursor"] is None
    assert [
        (e["type"], e["segment"], e["seq"], e["step"], e["ts"]) for e in events
    ] == [
        ("run_started", 0, 0, None, 1000.0),
        ("note", 0, 3, 1, 1003.0),
        ("checkpoint", 0, 4, 2, 1004.0),
        ("run_started", 1, 0, None, 1005.0),
        ("data_mix", 1, 1, 3, 1006.0),
        ("note", 1, 2, 4, 1007.0),
    ]
    assert events[1]["payload"] == {"text": "<b>lr warmup done</b>"}
    assert events[2]["payload"]["metrics"] == {"loss": "NaN"}
    assert events[4]["payload"]["weights"] == {"web": 0.7, "code": 0.3}
    assert set(events[0]) == {
        "id",
        "type",
        "segment",
        "seq",
        "step",
        "ts",
        "received_at",
        "payload",
    }

    def types(**params):
        return [
            (e["type"], e["segment"])
            for e in client.get(f"{API}/{run.run}/events", params=params).json()[
                "events"
            ]
        ]

    assert types(type="note") == [("note", 0), ("note", 1)]
    assert types(type=["note", "checkpoint"]) == [
        ("note", 0),
        ("checkpoint", 0),
        ("note", 1),
    ]
    assert types(segment=1) == [("run_started", 1), ("data_mix", 1), ("note", 1)]
    assert types(type="note", segment=1) == [("note", 1)]

    paged, after = [], None
    while True:
        params = {"limit": 4} | ({"after": after} if after else {})
        page = client.get(f"{API}/{run.run}/events", params=params).json()
        paged += page["events"]
        after = page["next_cursor"]
        if after is None:
            break
    assert paged == events


def export_run(seed):
    run = seed.run(name="export").start()
    run.log(
        {
            "loss": [(0, 2.5), (1, math.nan), (2, 0.1 + 0.2)],
            "a,b": [(1, math.inf), (2, -math.inf)],
        },
        ts0=1000.0,
    )
    run.resume(1)
    run.log({"loss": [(1, 1e-300), (2, -3.5)]}, ts0=2000.25)
    return run


def test_export_jsonl_exact(client, seed):
    run = export_run(seed)
    res = client.get(f"{API}/{run.run}/export")
    assert res.status_code == 200
    assert res.headers["content-type"] == "application/x-ndjson"
    assert (
        res.headers["content-disposition"]
        == f'attachment; filename="runcast-{run.run}.jsonl"'
    )
    assert res.text == (
        '{"segment":0,"key":"a,b","step":1,"value":"Infinity","time":1001.0}\n'
        '{"segment":0,"key":"a,b","step":2,"value":"-Infinity","time":1002.0}\n'
        '{"segment":0,"key":"loss","step":0,"value":2.5,"time":1000.0}\n'
        '{"segment":0,"key":"loss","step":1,"value":"NaN","time":1001.0}\n'
        '{"segment":0,"key":"loss","step":2,"value":0.30000000000000004,"time":1002.0}\n'
        '{"segment":1,"key":"loss","step":1,"value":1e-300,"time":2001.25}\n'
        '{"segment":1,"key":"loss","step":2,"value":-3.5,"time":2002.25}\n'
    )
    rows = [json.loads(line) for line in res.text.splitlines()]
    assert rows[4]["value"] == 0.1 + 0.2  # exact round trip

    only = client.get(f"{API}/{run.run}/export", params={"key": "a,b"}).text
    assert only.count("\n") == 2 and '"loss"' not in only


def test_export_csv_exact(client, seed):
    run = export_run(seed)
    res = client.get(f"{API}/{run.run}/export", params={"format": "csv"})
    assert res.status_code == 200
    assert res.headers["content-type"] == "text/csv; charset=utf-8"
    assert (
        res.headers["content-disposition"]
        == f'attachment; filename="runcast-{run.run}.csv"'
    )
    assert res.text == (
        "segment,key,step,value,time\n"
        '0,"a,b",1,Infinity,1001.0\n'
        '0,"a,b",2,-Infinity,1002.0\n'
        "0,loss,0,2.5,1000.0\n"
        "0,loss,1,NaN,1001.0\n"
        "0,loss,2,0.30000000000000004,1002.0\n"
        "1,loss,1,1e-300,2001.25\n"
        "1,loss,2,-3.5,2002.25\n"
    )


def test_export_pages_by_keyset(db: Any, client, seed):
    run = seed.run(name="big").start()
    run.log({"x": [(s, s / 7) for s in range(0, 3000, 3)]})
    whole = client.get(
        f"{API}/{run.run}/export", params={"key": "x", "format": "csv"}
    ).text
    detail = client.get(f"{API}/{run.run}").json()
    assert detail["keys"] == ["x"]
    # The same series exported in pages of 7 rows gives the same bytes.
    from runcast_server.record.models import Series

    with db.scope() as session:
        ids = dict(session.query(Series.key, Series.id).filter(Series.run_id == run.run))
    paged = b"".join(
        export_chunks(db, [SeriesRef(id=ids["x"], segment=0, key="x", times=ids["_timestamp"])], "csv", page_rows=7)
    ).decode()
    assert paged == whole
    assert whole.count("\n") == 1001


def test_export_unknown_key_is_404(client, seed):
    run = export_run(seed)
    res = client.get(f"{API}/{run.run}/export", params={"key": "nope"})
    assert res.status_code == 404
    assert res.json() == {
        "error": {"message": "metric 'nope' not found", "field": "key"}
    }
