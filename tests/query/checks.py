"""What every deployment must answer the query client: the same checks on the embedded server
and on the production stack (test_embedded.py, test_production.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
import runcast
from runcast.query import ApiError, history

from query.world import PRIVATE_RUN, RUN, World, expected_rows, same_rows, untimed


def check_times(world: World, run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every history row has its step's time as the API exports it (``time``) and the seconds since
    the run started, on every path: DataFrame, rows from Parquet, rows from JSONL, the stream; a key
    logged every tenth step gets those steps' times."""
    export = httpx.get(f"{world.server}/api/v1/runs/{RUN}/export", params={"format": "jsonl"},
                       headers={"Authorization": f"Bearer {world.token}"}, timeout=30)
    times = {(p["segment"], p["step"]): p["time"] for p in map(json.loads, export.text.splitlines())}
    start = run.info.started_at
    assert start is not None and all(t is not None and t >= start for t in times.values())
    assert len(times) == len(expected_rows())

    def check(rows: Any, keys: set[tuple[int, int]]) -> None:
        rows = list(rows)
        assert {(r["_segment"], r["_step"]) for r in rows} == keys
        for r in rows:
            assert r["_timestamp"] == times[(r["_segment"], r["_step"])]
            assert r["_runtime"] == pytest.approx(r["_timestamp"] - start)

    every, tenth = set(times), {k for k in times if k[1] % 10 == 0}
    df = run.history()
    check(({**r, "_segment": int(r["_segment"]), "_step": int(r["_step"])} for r in df.to_dict("records")), every)
    check(run.history(pandas=False), every)
    check(run.history(["acc"], pandas=False), tenth)
    check(run.scan_history(), every)
    check(run.scan_history(["acc"]), tenth)
    monkeypatch.setattr(history, "installed", lambda module: False)
    check(run.history(), every)
    check(run.history(["acc"]), tenth)
    monkeypatch.undo()


def check_reads(world: World, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with runcast.Api(world.server, world.token) as api:
        run = api.run(RUN)
        assert (run.name, run.project, run.group, run.tags, run.notes) == ("baseline", "alpha", "g1",
                                                                          ["base", "sweep"], "first try")
        assert run.config == {"lr": 3e-4, "layers": 2}
        assert run.summary["best"] == 0.25
        assert [(s.index, s.start_step, s.resumed) for s in run.segments] == [(0, 0, False), (1, 30, True)]
        want = expected_rows()

        assert same_rows(untimed(run.history(pandas=False)), want)
        df = run.history()
        assert list(df.columns) == ["_segment", "_step", "_timestamp", "_runtime", "acc", "loss"]
        rows = [{k: v for k, v in r.items() if not (k == "acc" and math.isnan(v))} for r in df.to_dict("records")]
        assert same_rows(untimed([{**r, "_segment": int(r["_segment"]), "_step": int(r["_step"])} for r in rows]), want)
        assert same_rows(untimed(run.scan_history()), want)
        assert same_rows(untimed(run.scan_history(["acc"])), [{"_segment": r["_segment"], "_step": r["_step"],
                                                               "acc": r["acc"]} for r in want if "acc" in r])
        loss_only = run.history(["loss"], pandas=False)
        assert same_rows(untimed(loss_only), [{k: v for k, v in r.items() if k != "acc"} for r in want])
        sampled = run.history(["loss"], samples=5)
        assert len(sampled) == 5 and sampled["_step"].iloc[0] == 0 and sampled["_step"].iloc[-1] == 80
        with pytest.raises(KeyError, match="no metric 'nope'"):
            run.history(["nope"])

        # Without pyarrow (and without pandas): the JSONL export gives the same rows.
        check_times(world, run, monkeypatch)
        monkeypatch.setattr(history, "installed", lambda module: False)
        assert same_rows(untimed(run.history()), want)
        monkeypatch.undo()

        [ckpt] = run.checkpoints()
        assert (ckpt.step, ckpt.status, ckpt.metrics) == (30, "available", {"val/loss": 0.5})
        path = run.download_checkpoint(30, tmp / "dl")
        assert path.read_bytes() == b"weights-30" * 100
        assert run.download_checkpoint(ckpt, tmp / "dl2").read_bytes() == path.read_bytes()
        with pytest.raises(ApiError, match="no checkpoint at step 31"):
            run.download_checkpoint(31, tmp / "dl3")
        assert run.alerts() == [] or all(a.kind for a in run.alerts())

        listed = [r.id for r in api.runs("alpha")]
        assert listed == [PRIVATE_RUN, RUN]  # newest first; its project's token sees the private run
        assert [r.id for r in api.runs("alpha", order="+created_at")] == [RUN, PRIVATE_RUN]
        assert [r.id for r in api.runs("alpha", tags=["sweep", "base"], per_page=1)] == [RUN]
        assert [r.id for r in api.runs("alpha", tags=["sweep", "other"])] == []
        assert [r.id for r in api.runs(group="g1", status="finished")] == [RUN]
        with pytest.raises(ValueError, match="order must be"):
            api.runs(order="name")

        # W&B's habits: api.run("entity/project/run_id"), api.runs("entity/project")
        assert api.run(f"alpha/{RUN}").id == RUN and api.run(f"someone/alpha/{RUN}").id == RUN
        assert [r.id for r in api.runs("someone/alpha")] == listed
        with pytest.raises(ApiError) as wrong:
            api.run(f"beta/{RUN}")
        assert (wrong.value.status, wrong.value.field) == (404, "path")
        for bad in ("", "alpha/", f"a/b/c/{RUN}", "alpha/short", f"/{RUN}"):
            with pytest.raises(ValueError, match="a run is its id"):
                api.run(bad)


def check_walls(world: World) -> None:
    for token in (None, world.other):
        with runcast.Api(world.server, token) as api:
            with pytest.raises(ApiError) as hidden:
                api.run(PRIVATE_RUN)
            assert hidden.value.status == 404 and hidden.value.field == "run"
            assert [r.id for r in api.runs("alpha")] == [RUN]
            public = api.run(RUN)
            with pytest.raises(ApiError) as refused:
                public.update(name="stolen")
            assert refused.value.status == (401 if token is None else 404)
    with runcast.Api(world.server, world.token) as api:
        assert api.run(RUN).name == "baseline"


def check_update(world: World) -> None:
    with runcast.Api(world.server, world.token) as api:
        run = api.run(RUN).update(name="renamed", tags=["base", "best"], notes="better than it looked")
        assert (run.name, run.tags, run.notes) == ("renamed", ["base", "best"], "better than it looked")
        again = api.run(RUN)
        assert (again.name, again.tags, again.notes) == ("renamed", ["base", "best"], "better than it looked")
        assert api.run(RUN).update(notes="").notes is None
        with pytest.raises(ApiError) as bad:
            run.update(name=" ")
        assert (bad.value.status, bad.value.field) == (422, "name")


def check_all(world: World, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    check_reads(world, tmp, monkeypatch)
    check_walls(world)
    check_update(world)
