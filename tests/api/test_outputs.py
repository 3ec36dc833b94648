"""Samples, evaluations and media from the user's seat (docs/samples.md): what a trainer sends
through POST /api/v1/ingest is read back exactly, long text clipped with its whole length, pages
that join up, checkpoints that carry their scores; a hostile field or an image the project does not
hold refuses the whole batch by name, storing nothing, other runs unharmed."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from runcast.wire import events as ev

from api.outputs_data import (
    CONFIG,
    HELLASWAG,
    HISTOGRAM,
    IMAGE,
    LONG,
    SCORES,
    SETTINGS,
    STEPS,
    STORY,
    TABLE,
    VERSIONS,
    everything,
    fetch,
    send_outputs,
)
from api.test_policy import Trainer


@pytest.fixture
def logged(client: Any, seed: Any) -> dict[str, Any]:
    token = seed.token("team")
    blob = seed.blob("team", IMAGE)
    t = Trainer(client, token).start()
    send_outputs(t, blob)
    return {"t": t, "run": t.run, "token": token, "blob": blob}


def test_prompts_give_each_prompt_its_count_steps_and_clipped_text(client, logged):
    body = fetch(client, logged["run"], "/samples/prompts")
    assert body == {"withheld": False, "prompts": [
        {"key": "chat", "prompt_id": "hello", "prompt": "Hi!", "prompt_chars": 3, "count": 3, "first_step": 10,
         "last_step": 30},
        {"key": "samples", "prompt_id": "capital", "prompt": "The capital of France is", "prompt_chars": 24,
         "count": 3, "first_step": 10, "last_step": 30},
        {"key": "samples", "prompt_id": "story", "prompt": STORY[:500], "prompt_chars": len(STORY), "count": 3,
         "first_step": 10, "last_step": 30},
    ]}
    only = fetch(client, logged["run"], "/samples/prompts", key="chat")["prompts"]
    assert [p["prompt_id"] for p in only] == ["hello"]


def test_samples_oldest_step_first_clipped_and_whole_on_demand(client, logged):
    run = logged["run"]
    story = fetch(client, run, "/samples", key="samples", prompt="story")
    assert story["next_cursor"] is None and not story["withheld"]
    assert [s["step"] for s in story["samples"]] == list(STEPS)
    for s, step in zip(story["samples"], STEPS):
        assert s["output"] == (LONG + str(step))[:2000] and s["output_chars"] == len(LONG) + 2
        assert (s["reference"], s["reference_chars"]) == ("R" * 2000, 2100)
        assert (s["key"], s["prompt_id"], s["segment"], s["scores"], s["settings"]) == ("samples", "story", 0, None,
                                                                                          None)
        whole = fetch(client, run, f"/samples/{s['id']}")
        assert whole == {"id": s["id"], "segment": 0, "step": step, "key": "samples", "prompt_id": "story",
                         "prompt": STORY, "output": LONG + str(step), "reference": "R" * 2100, "scores": None,
                         "settings": None}
    capital = fetch(client, run, "/samples", prompt="capital")["samples"]
    assert [(s["output"], s["scores"], s["settings"], s["reference"]) for s in capital] == [
        (f" Paris ({step})", SCORES, SETTINGS, None) for step in STEPS]
    assert len(fetch(client, run, "/samples")["samples"]) == 9


@pytest.mark.parametrize("path", ["/samples", "/media"])
def test_pages_join_up_exactly(client, logged, path):
    run = logged["run"]
    whole = fetch(client, run, path, limit=1000)
    name = path.strip("/")
    seen, after = [], None
    while True:
        page = fetch(client, run, path, limit=2, **({"after": after} if after else {}))
        seen += page[name]
        after = page["next_cursor"]
        if after is None:
            break
    assert seen == whole[name] and len(seen) >= 4
    assert [(r["step"], r["id"]) for r in seen] == sorted((r["step"], r["id"]) for r in seen)


def test_evals_and_the_checkpoints_they_belong_to(client, logged):
    run = logged["run"]
    evals = fetch(client, run, "/evals")
    hellaswag = {"segment": 0, "step": 20, "checkpoint": 20, "suite": "lm-eval-harness", "task": "hellaswag",
                 "metrics": HELLASWAG, "n": 100}
    later = [{"segment": 0, "step": 30, "checkpoint": None, "suite": "quick", "task": "arc_easy",
              "metrics": {"acc": 0.52}, "n": None},
             {"segment": 0, "step": 31, "checkpoint": 10, "suite": "quick", "task": "arc_easy",
              "metrics": {"acc": 0.55}, "n": None}]
    assert [{k: v for k, v in e.items() if k != "id"} for e in evals["evals"]] == [hellaswag, *later]
    assert fetch(client, run, "/evals", suite="quick", task="arc_easy")["evals"] == evals["evals"][1:]
    (checkpoint,) = fetch(client, run, "/checkpoints")["checkpoints"]
    assert checkpoint["evals"] == evals["evals"][:1]  # tied to step 20; not the one logged at 30
    card = fetch(client, run, f"/checkpoints/{checkpoint['id']}/card")
    assert card["evals"] == evals["evals"][:1]
    team = {"Authorization": f"Bearer {logged['token']}"}
    t = logged["t"]  # a later evaluation of the checkpoint (runcast eval import), and one logged at its step
    t.send(("eval", {"step": 99, "suite": "late", "task": "x", "metrics": {"a": 1}, "checkpoint": 20,
                     "config": CONFIG, "versions": VERSIONS}),
           ("eval", {"step": 20, "suite": "same step", "task": "y", "metrics": {"b": 2}}))
    tasks = [e["task"] for e in fetch(client, run, "/checkpoints", team)["checkpoints"][0]["evals"]]
    assert tasks == ["hellaswag", "y", "x"]


def test_media_keys_and_rows_as_the_trainer_sent_them(client, logged):
    run, blob = logged["run"], logged["blob"]
    assert fetch(client, run, "/media/keys") == {"withheld": False, "keys": [
        {"key": "gen/grid", "kind": "image", "count": 2, "first_step": 10, "last_step": 20},
        {"key": "val/worst", "kind": "table", "count": 1, "first_step": 10, "last_step": 10},
        {"key": "weights/l0", "kind": "histogram", "count": 1, "first_step": 20, "last_step": 20}]}
    rows = fetch(client, run, "/media")["media"]
    image = {"key": "gen/grid", "kind": "image", "blob": blob, "content_type": "image/png", "width": 1, "height": 1,
             "size": len(IMAGE)}
    expected = [
        {**image, "step": 10, "caption": "step 10"},
        {"step": 10, "key": "val/worst", "kind": "table", "caption": None, **TABLE},
        {"step": 20, "key": "weights/l0", "kind": "histogram", "caption": None, **HISTOGRAM, "neg_inf": None},
        {**image, "step": 20, "caption": None},
    ]
    assert [{k: v for k, v in r.items() if k not in ("id", "segment", "image_url")} for r in rows] == expected
    for r in rows:
        assert r.get("image_url") == (f"/api/v1/runs/{run}/media/{r['id']}/image" if r["kind"] == "image" else None)
    assert [type(c) for c in rows[1]["rows"][2]] == [str, int, type(None)]  # integers stay integers
    assert [r["step"] for r in fetch(client, run, "/media", key="gen/grid")["media"]] == [10, 20]


def test_outputs_beat_and_move_the_step_like_any_event(client, seed):
    t = Trainer(client, seed.token("team")).start()
    t.log(5, {"loss": 1.0})
    before = client.get(f"/api/v1/runs/{t.run}").json()
    time.sleep(0.01)
    t.send(("sample", {"step": 12, "key": "samples", "prompt_id": "p", "prompt": "", "output": "x"}))
    after = client.get(f"/api/v1/runs/{t.run}").json()
    assert (before["last_step"], after["last_step"]) == (5, 12)
    assert after["heartbeat_at"] > before["heartbeat_at"]
    assert after["keys"] == ["loss"]  # a sample key is not a metric


SAMPLE = {"type": "sample", "step": 1, "key": "samples", "prompt_id": "p", "prompt": "q", "output": "a"}
EVAL = {"type": "eval", "step": 1, "suite": "s", "task": "t", "metrics": {"acc": 0.5}}
TABLE_EVENT = {"type": "media", "step": 1, "key": "t", "kind": "table", "columns": ["a", "b"], "rows": [[1, "x"]]}
HIST_EVENT = {"type": "media", "step": 1, "key": "h", "kind": "histogram", "edges": [0, 1], "counts": [3]}
IMAGE_EVENT = {"type": "media", "step": 1, "key": "i", "kind": "image", "blob": "0" * 64, "content_type": "image/png",
               "width": 2, "height": 2, "size": 10}
HOSTILE = [
    (SAMPLE, {"prompt_id": ""}, "prompt_id"), (SAMPLE, {"prompt_id": "a\nb"}, "prompt_id"),
    (SAMPLE, {"prompt_id": "x" * 201}, "prompt_id"), (SAMPLE, {"prompt": "nul\x00"}, "prompt"),
    (SAMPLE, {"output": "lone \ud800"}, "output"), (SAMPLE, {"output": "x" * 262_145}, "output"),
    (SAMPLE, {"output": None}, "output"), (SAMPLE, {"reference": 5}, "reference"),
    (SAMPLE, {"key": "a\x07"}, "key.'a\\x07'"), (SAMPLE, {"step": -1}, "step"),
    (SAMPLE, {"scores": {"bleu": "high"}}, "scores.bleu"), (SAMPLE, {"settings": {"x": "\x00"}}, "settings.x"),
    (SAMPLE, {"settings": [1]}, "settings"),
    (EVAL, {"suite": " "}, "suite"), (EVAL, {"task": "\x1b[31m"}, "task"), (EVAL, {"metrics": {}}, "metrics"),
    (EVAL, {"metrics": {"acc": True}}, "metrics.acc"), (EVAL, {"checkpoint": "step:3"}, "checkpoint"),
    (EVAL, {"n": -1}, "n"), (EVAL, {"config": {"x": "y" * 70_000}}, "config"),
    (IMAGE_EVENT, {"kind": "video"}, "kind"), (IMAGE_EVENT, {"blob": "../../etc/passwd"}, "blob"),
    (IMAGE_EVENT, {"content_type": "image/svg+xml"}, "content_type"),
    (IMAGE_EVENT, {"content_type": "text/html"}, "content_type"), (IMAGE_EVENT, {"width": 0}, "width"),
    (IMAGE_EVENT, {"caption": "c" * 1001}, "caption"),
    (TABLE_EVENT, {"rows": [[1, "x"], [2]]}, "rows.1"), (TABLE_EVENT, {"rows": [["<script>", {"a": 1}]]}, "rows.0.1"),
    (TABLE_EVENT, {"columns": []}, "columns"), (TABLE_EVENT, {"rows": [[2**63, 1]]}, "rows.0.0"),
    (HIST_EVENT, {"edges": [1, 0]}, "edges"), (HIST_EVENT, {"counts": [1, 2]}, "counts"),
    (HIST_EVENT, {"counts": [-1]}, "counts.0"), (HIST_EVENT, {"edges": [0, 10**400]}, "edges.1"),
]


def _post(client: Any, token: str, run: Any, *events: dict[str, Any]) -> Any:
    batch = []
    for e in events:
        batch.append({"v": 1, "run": run.run, "segment": run.segment, "seq": run.seq, "ts": time.time(), **e})
        run.seq += 1
    body = json.dumps({"v": 1, "events": batch})  # ASCII: a lone surrogate travels escaped, as JSON allows
    return client.post("/api/v1/ingest", content=body, headers={"Authorization": f"Bearer {token}",
                                                                "Content-Type": "application/json"})


@pytest.mark.parametrize(("base", "change", "field"), HOSTILE, ids=[f"{b['type']}-{f}" for b, _, f in HOSTILE])
def test_a_hostile_field_refuses_the_whole_batch_by_name(client, seed, logged, base, change, field):
    token = seed.token("team")
    t = Trainer(client, token).start()
    others = everything(client, logged["run"])
    r = _post(client, token, t, SAMPLE | {"prompt_id": "kept?"}, base | change)
    assert r.status_code == 422, r.text
    assert (r.json()["error"]["field"], r.json()["error"]["index"]) == (field, 1)
    assert fetch(client, t.run, "/samples")["samples"] == []  # nothing of the batch
    assert client.get(f"/api/v1/runs/{t.run}").json()["last_step"] is None
    assert everything(client, logged["run"]) == others  # other runs unharmed


def test_an_image_the_project_does_not_hold_is_404_naming_the_blob(client, seed, logged):
    token = seed.token("team")
    theirs = seed.blob("rivals", b"another project's image")
    t = Trainer(client, token).start()
    for sha in ("0" * 64, theirs):
        r = _post(client, token, t, SAMPLE, TABLE_EVENT, IMAGE_EVENT | {"blob": sha})
        assert r.status_code == 404, r.text
        assert (r.json()["error"]["field"], r.json()["error"]["index"]) == ("blob", 2)
        assert sha in r.json()["error"]["message"]
    assert fetch(client, t.run, "/samples")["samples"] == [] and fetch(client, t.run, "/media")["media"] == []
    r = _post(client, token, t, IMAGE_EVENT | {"blob": logged["blob"]})  # the project's own: taken
    assert r.status_code == 202, r.text
    assert [m["blob"] for m in fetch(client, t.run, "/media")["media"]] == [logged["blob"]]


def test_the_worker_refuses_an_image_without_its_blob_and_stores_the_rest(db, client, seed):
    """A batch in the inbox naming a blob the project lacks (accepted before the blob was lost, or
    written past the API): the worker stores the other events and quarantines the batch."""
    from runcast_server.inbox import accept as inbox
    from runcast_server.inbox.process import Policy, process
    from runcast_server.ingest.results import UnknownBlob
    from runcast_server.ingest.store import store_batch

    sim = seed.run("team").start()
    image = sim.media(1, "i", "image", blob="0" * 64, content_type="image/png", width=1, height=1, size=1)
    with pytest.raises(UnknownBlob), db.scope() as session:
        store_batch(session, sim.project_id, [sim.sample(1, "p", "kept"), image])
    body = ev.dumps_batch([ev.encode_event(e) for e in (sim.sample(2, "p", "kept"), image)])
    with db.scope() as session:
        inbox_id = inbox.add(session, sim.project_id, body, 2, time.time(), next_sweep_at=time.time() + 60)
    outcome = process(db, inbox_id, Policy(retry_max_s=1.0, retention_s=60.0), lambda result: None)
    assert (outcome.state, outcome.events) == ("quarantined", 1)  # the sample stored, the image not
    assert [s["step"] for s in fetch(client, sim.run, "/samples")["samples"]] == [2]
    assert fetch(client, sim.run, "/media")["media"] == []
