"""A run that logs samples, evaluations and media beside its metrics, sent through POST /api/v1/ingest
as the SDK sends them, and what the read API must give back of it (docs/samples.md)."""

from __future__ import annotations

import base64
from typing import Any

from api.test_policy import Trainer

IMAGE = base64.b64decode(  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==")
STEPS = (10, 20, 30)
STORY = "Once upon a time, " * 40  # 720 characters: clipped to 500 in the prompt list
LONG = "é" * 2500  # an output past the 2,000 characters of the sample list
SCORES = {"bleu": 0.25, "len": 3, "odd": "NaN"}
SETTINGS = {"temperature": 0.8, "top_p": 0.95, "seed": 7}
HELLASWAG = {"acc,none": 0.31, "acc_norm,none": 0.35, "acc_stderr,none": "NaN"}
CONFIG = {"model": "hf", "num_fewshot": 0, "batch_size": 8}
VERSIONS = {"hellaswag": 1.0}
TABLE = {"columns": ["prompt", "loss", "ok"], "rows": [["a", 3.1, True], ["b", None, False], ["c", 2, None]]}
HISTOGRAM = {"edges": [-1.0, 0.0, 0.5, 1.0], "counts": [5.0, 7.0, 0.0], "nan": 1.0, "inf": 0.0}


def sample_events(step: int) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("sample", {"step": step, "key": "samples", "prompt_id": "capital", "prompt": "The capital of France is",
                    "output": f" Paris ({step})", "scores": SCORES, "settings": SETTINGS}),
        ("sample", {"step": step, "key": "samples", "prompt_id": "story", "prompt": STORY, "output": LONG + str(step),
                    "reference": "R" * 2100}),
        ("sample", {"step": step, "key": "chat", "prompt_id": "hello", "prompt": "Hi!", "output": "Hello."}),
    ]


def send_outputs(t: Trainer, blob: str) -> None:
    """Metrics, then per step three samples; evaluations tied to the checkpoint at 20 and logged at 30;
    images (``blob``: held by the project), a table and a histogram."""
    for step in STEPS:
        t.log(step, {"loss": 3.0 - step / 100})
        t.send(*sample_events(step))
    image = {"kind": "image", "blob": blob, "content_type": "image/png", "width": 1, "height": 1, "size": len(IMAGE)}
    t.send(("checkpoint", {"step": 20, "path": "/ck/20.pt", "size": 1, "public": True, "status": "available"}),
           ("eval", {"step": 20, "suite": "lm-eval-harness", "task": "hellaswag", "metrics": HELLASWAG,
                     "checkpoint": 20, "n": 100, "config": CONFIG, "versions": VERSIONS}),
           ("eval", {"step": 30, "suite": "quick", "task": "arc_easy", "metrics": {"acc": 0.52}}),
           ("eval", {"step": 31, "suite": "quick", "task": "arc_easy", "metrics": {"acc": 0.55}, "checkpoint": 10}))
    t.send(("media", {"step": 10, "key": "gen/grid", "caption": "step 10", **image}),
           ("media", {"step": 10, "key": "val/worst", "kind": "table", **TABLE}),
           ("media", {"step": 20, "key": "weights/l0", "kind": "histogram", **HISTOGRAM}),
           ("media", {"step": 20, "key": "gen/grid", **image}))


def fetch(client: Any, run: str, path: str, headers: dict[str, str] | None = None, **params: Any) -> Any:
    r = client.get(f"/api/v1/runs/{run}{path}", params=params, headers=headers or {})
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json()


def everything(client: Any, run: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """What one reader gets of the run's samples, evals and media on every read path."""
    listed = fetch(client, run, "/samples", headers, limit=1000)
    return {
        "prompts": fetch(client, run, "/samples/prompts", headers),
        "samples": listed,
        "whole": [fetch(client, run, f"/samples/{s['id']}", headers) for s in listed["samples"]],
        "evals": fetch(client, run, "/evals", headers),
        "media_keys": fetch(client, run, "/media/keys", headers),
        "media": fetch(client, run, "/media", headers, limit=1000),
        "checkpoint_evals": [c["evals"] for c in fetch(client, run, "/checkpoints", headers)["checkpoints"]],
    }
