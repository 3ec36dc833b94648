"""Samples, evaluations and media on the production stack: POST /ingest → inbox → Celery worker →
PostgreSQL → REST reads, the export and the stream's replay; beside metrics, every field read back
exactly (docs/samples.md)."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import httpx
from runcast.wire import events as ev
from sqlalchemy import text

from integration.helpers import WireRun, export_rows, post_batch, wait_points
from services import wait_until

STEPS = 50
PROMPTS = {"capital": "The capital of France is", "long": "Once upon a time, " * 60}
IMAGE = b"\x89PNG\r\n\x1a\n not decoded here: the blob row is what ingest checks"


def _sample(run: WireRun, step: int, prompt_id: str) -> dict[str, Any]:
    return run.event("sample", step=step, key="samples", prompt_id=prompt_id, prompt=PROMPTS[prompt_id],
                      output=f"{prompt_id} at {step}: " + "ü" * (step * 60), reference=None if step % 2 else "ref",
                      scores={"bleu": step / 100, "odd": "NaN"} if prompt_id == "capital" else None,
                      settings={"temperature": 0.7, "seed": step})


def _get(url: str, token: str, path: str, **params: Any) -> Any:
    r = httpx.get(f"{url}/api/v1/runs{path}", params=params, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert r.status_code == 200, (path, r.text)
    return r.json()


def test_outputs_beside_metrics_round_trip_on_postgres(stack):
    stack.start_worker()
    stack.start_api()
    token = stack.token("outputs")
    with stack.engine.begin() as conn:  # the project holds the image (PUT /blobs/{sha256}: another part)
        project = conn.execute(text("SELECT id FROM projects WHERE name = 'outputs'")).scalar_one()
        blob = hashlib.sha256(IMAGE).hexdigest()
        conn.execute(text("INSERT INTO blobs (project_id, sha256, size, content_type, width, height, created_at)"
                          " VALUES (:p, :s, :n, 'image/png', 4, 2, 0)"), {"p": project, "s": blob, "n": len(IMAGE)})
    run = WireRun("outputs")
    assert post_batch(stack.api_url, token, [run.started()]).status_code == 202
    sent: list[dict[str, Any]] = []
    for lo in range(0, STEPS, 10):
        batch = [run.metrics(step, {"loss": 1.0 / (step + 1)}) for step in range(lo, lo + 10)]
        outputs = [_sample(run, step, p) for step in range(lo, lo + 10, 5) for p in PROMPTS]
        outputs.append(run.event("eval", step=lo + 9, suite="lm-eval-harness", task="hellaswag",
                                  metrics={"acc,none": lo / 100, "acc_stderr,none": "NaN"}, checkpoint=lo + 9, n=10,
                                  config={"num_fewshot": 0}, versions={"hellaswag": 1}))
        outputs.append(run.event("media", step=lo, key="gen/grid", kind="image", blob=blob, content_type="image/png",
                                  width=4, height=2, size=len(IMAGE), caption=f"step {lo}"))
        outputs.append(run.event("media", step=lo, key="weights", kind="histogram", edges=[0, 0.5, 1],
                                  counts=[lo, 1], nan=0))
        sent += outputs
        assert post_batch(stack.api_url, token, batch + outputs).status_code == 202
    missing = run.event("media", step=99, key="gen/grid", kind="image", blob="f" * 64, content_type="image/png",
                         width=1, height=1, size=1)
    refused = post_batch(stack.api_url, token, [_sample(run, 99, "capital"), missing])
    assert refused.status_code == 404 and refused.json()["error"] == {
        "message": refused.json()["error"]["message"], "field": "blob", "index": 1}
    url, rid = stack.api_url, run.run
    wait_points(stack.engine, rid, STEPS, procs=stack.processes[:1])
    samples_sent = [e for e in sent if e["type"] == "sample"]
    wait_until(lambda: len(_get(url, token, f"/{rid}/samples", limit=1000)["samples"]) == len(samples_sent),
               120, "the samples stored", interval=0.5)
    wait_until(lambda: len(_get(url, token, f"/{rid}/media", limit=1000)["media"]) == 10, 120, "the media stored",
               interval=0.5)

    # Every field back exactly: samples whole, in step order (then as sent), evals, media.
    fields = ("step", "key", "prompt_id", "prompt", "output", "reference", "scores", "settings")
    wire = [ev.encode_event(ev.validate_event(e)) for e in sent]  # NaN as "NaN", numbers as the wire has them
    exported = [json.loads(line) for line in httpx.get(
        f"{url}/api/v1/runs/{rid}/export", params={"what": "samples"}, headers={"Authorization": f"Bearer {token}"},
        timeout=60).text.splitlines()]
    assert [{k: r[k] for k in fields} for r in exported] == [
        {k: e.get(k) for k in fields} for e in wire if e["type"] == "sample"]
    listed = _get(url, token, f"/{rid}/samples", limit=1000)["samples"]
    for item, row in zip(listed, exported):
        assert item["output"] == row["output"][:2000] and item["output_chars"] == len(row["output"])
        assert {k: v for k, v in _get(url, token, f"/{rid}/samples/{item['id']}").items()
                if k in fields} == {k: row[k] for k in fields}
    eval_fields = ("step", "suite", "task", "metrics", "checkpoint", "n", "config", "versions")
    evals = [json.loads(line) for line in httpx.get(
        f"{url}/api/v1/runs/{rid}/export", params={"what": "evals"}, headers={"Authorization": f"Bearer {token}"},
        timeout=60).text.splitlines()]
    assert [{k: r[k] for k in eval_fields} for r in evals] == [
        {k: e.get(k) for k in eval_fields} for e in wire if e["type"] == "eval"]
    media = _get(url, token, f"/{rid}/media", limit=1000)["media"]
    media_fields = ("step", "key", "kind", "caption", "blob", "content_type", "width", "height", "size", "edges",
                    "counts", "nan")
    assert [{k: m.get(k) for k in media_fields} for m in media] == [
        {k: e.get(k) for k in media_fields} for e in wire if e["type"] == "media"]
    # The metrics beside them, unharmed; the refused batch stored nothing.
    assert [r["step"] for r in export_rows(url, rid, token)] == list(range(STEPS))
    assert all(s["step"] != 99 for s in listed)

    # The stream's replay (run_versions.outputs on PostgreSQL) names the same rows.
    streamed: dict[str, list[int]] = {"samples": [], "evals": [], "media": []}
    deadline = time.monotonic() + 60
    with httpx.stream("GET", f"{url}/api/v1/runs/{rid}/stream", params={"last_event_id": "0"},
                      headers={"Authorization": f"Bearer {token}"}, timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and '"points"' in line:
                message = json.loads(line[6:])
                for kind, ids in streamed.items():
                    ids += [row["id"] for row in message[kind]]
                if len(streamed["media"]) >= len(media) or time.monotonic() > deadline:
                    break  # the last batch's media come last
    assert streamed == {"samples": [s["id"] for s in sorted(listed, key=lambda s: s["id"])],
                        "evals": sorted(e["id"] for e in _get(url, token, f"/{rid}/evals")["evals"]),
                        "media": sorted(m["id"] for m in media)}
