"""Exporting samples and evaluations (``GET /runs/{id}/export?what=``, ``runcast export --what``): JSONL and
Parquet give back every field exactly as the trainer sent it, in step order, across pages; what the
export cannot do is a 422 or 404 naming the parameter; metrics stay the default."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from api.outputs_data import CONFIG, HELLASWAG, IMAGE, LONG, SCORES, SETTINGS, STORY, VERSIONS, send_outputs
from api.test_export_cli import cli, server  # noqa: F401  (the live server fixture)
from api.test_policy import Trainer


@pytest.fixture
def logged(client: Any, seed: Any) -> dict[str, Any]:
    token = seed.token("team")
    t = Trainer(client, token).start()
    send_outputs(t, seed.blob("team", IMAGE))
    return {"t": t, "run": t.run, "token": token}


def _samples() -> list[dict[str, Any]]:
    """The samples ``send_outputs`` sends, as the export gives them (step order, then as stored)."""
    rows = []
    for step in (10, 20, 30):
        rows += [
            {"segment": 0, "step": step, "key": "samples", "prompt_id": "capital", "prompt": "The capital of France is",
             "output": f" Paris ({step})", "reference": None, "scores": SCORES, "settings": SETTINGS},
            {"segment": 0, "step": step, "key": "samples", "prompt_id": "story", "prompt": STORY,
             "output": LONG + str(step), "reference": "R" * 2100, "scores": None, "settings": None},
            {"segment": 0, "step": step, "key": "chat", "prompt_id": "hello", "prompt": "Hi!", "output": "Hello.",
             "reference": None, "scores": None, "settings": None},
        ]
    return rows


EVALS = [
    {"segment": 0, "step": 20, "checkpoint": 20, "suite": "lm-eval-harness", "task": "hellaswag",
     "metrics": HELLASWAG, "n": 100, "config": CONFIG, "versions": VERSIONS},
    {"segment": 0, "step": 30, "checkpoint": None, "suite": "quick", "task": "arc_easy", "metrics": {"acc": 0.52},
     "n": None, "config": None, "versions": None},
    {"segment": 0, "step": 31, "checkpoint": 10, "suite": "quick", "task": "arc_easy", "metrics": {"acc": 0.55},
     "n": None, "config": None, "versions": None},
]


def _jsonl(client: Any, run: str, **params: Any) -> list[dict[str, Any]]:
    r = client.get(f"/api/v1/runs/{run}/export", params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in r.text.splitlines()]


def test_jsonl_gives_back_every_field_exactly(client, logged):
    run = logged["run"]
    assert _jsonl(client, run, what="samples") == _samples()
    assert _jsonl(client, run, what="samples", key="chat") == [r for r in _samples() if r["key"] == "chat"]
    assert _jsonl(client, run, what="evals") == EVALS
    assert {r["key"] for r in _jsonl(client, run)} == {"loss"}  # metrics: the default, unchanged
    r = client.get(f"/api/v1/runs/{run}/export", params={"what": "evals", "format": "parquet"})
    assert r.headers["content-disposition"] == f'attachment; filename="runcast-{run}-evals.parquet"'


def _read_parquet(data: bytes) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows = pq.read_table(io.BytesIO(data)).to_pylist()
    for row in rows:  # maps as pairs, JSON objects as text: back to what JSONL holds
        for name in ("scores", "metrics"):
            if name in row and row[name] is not None:
                row[name] = {k: "NaN" if math.isnan(v) else v for k, v in row[name]}
        for name in ("settings", "config", "versions"):
            if row.get(name) is not None:
                row[name] = json.loads(row[name])
    return rows


def test_parquet_gives_back_every_field_exactly(client, logged):
    run = logged["run"]
    for what, expected in (("samples", _samples()), ("evals", EVALS)):
        r = client.get(f"/api/v1/runs/{run}/export", params={"what": what, "format": "parquet"})
        assert r.status_code == 200 and r.headers["content-type"] == "application/vnd.apache.parquet"
        assert _read_parquet(r.content) == expected, what


def test_pages_and_row_groups_keep_the_order(db, client, logged, monkeypatch):
    from runcast_server.outputs import export, export_parquet

    t = logged["t"]
    t.send(*[("sample", {"step": s // 3, "key": "many", "prompt_id": f"p{s % 3}", "prompt": "", "output": str(s)})
             for s in range(250)])
    monkeypatch.setitem(export.PAGE_ROWS, "samples", 7)
    monkeypatch.setattr(export_parquet, "GROUP_ROWS", 20)
    lines = _jsonl(client, logged["run"], what="samples", key="many")
    assert [r["output"] for r in lines] == [str(s) for s in range(250)]
    r = client.get(f"/api/v1/runs/{logged['run']}/export", params={"what": "samples", "format": "parquet", "key": "many"})
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(io.BytesIO(r.content))
    assert parquet.metadata.num_row_groups > 5
    assert parquet.read().column("output").to_pylist() == [str(s) for s in range(250)]


@pytest.mark.parametrize(("params", "status", "field"), [
    ({"what": "samples", "format": "csv"}, 422, "format"),
    ({"what": "evals", "format": "csv"}, 422, "format"),
    ({"what": "evals", "key": "samples"}, 422, "key"),
    ({"what": "samples", "key": "no-such-key"}, 404, "key"),
    ({"what": "media"}, 422, "what"),
])
def test_what_an_export_cannot_do_is_named(client, logged, params, status, field):
    r = client.get(f"/api/v1/runs/{logged['run']}/export", params=params)
    assert r.status_code == status, r.text
    assert r.json()["error"]["field"] == field


def test_the_cli_exports_samples_and_evals(server, client, logged, tmp_path: Path):  # noqa: F811
    run, token = logged["run"], logged["token"]
    res = cli(run, "--server", server, "--what", "samples", "--key", "chat")
    assert res.returncode == 0, res.stderr
    assert [json.loads(line) for line in res.stdout.splitlines()] == [r for r in _samples() if r["key"] == "chat"]
    out = tmp_path / "evals.parquet"
    res = cli(run, "--server", server, "--token", token, "--what", "evals", "--format", "parquet", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert _read_parquet(out.read_bytes()) == EVALS
    res = cli(run, "--server", server, "--what", "evals", "--format", "csv")
    assert res.returncode != 0 and "--format" in res.stderr
