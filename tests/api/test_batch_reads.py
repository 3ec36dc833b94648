"""``GET /runs/{id}/batch``: each read's answer is exactly what its own GET answers the same caller
(body, status, publication policy, walls between projects); bad reads are a 422 naming ``read``;
the batch is a shared object for anonymous callers and private with a token."""

from __future__ import annotations

import json
from typing import Any

import pytest
from commands.helpers import API, Trainer
from runcast_server.core.auth import create_token

READS = ["checkpoints", "revisions", "evals", "samples/prompts", "media/keys", "comments", "reports",
         "alerts?limit=1000", "events?limit=1000", "metrics?key=loss&max_points=50",
         "metrics?key=secret&max_points=50", "metrics?key=nope", "metrics?key=loss&max_points=0"]


@pytest.fixture
def tokens(db: Any) -> dict[str, str]:
    with db.scope() as session:
        return {"own": create_token(session, "pp", label="team"), "other": create_token(session, "other", label="x")}


def _run(client: Any, token: str, run: str, visibility: str = "public") -> None:
    trainer = Trainer(client, token, run)
    assert trainer.start(visibility, policy={"metrics": ["loss"]}).status_code == 202
    for step in range(1, 30):
        assert trainer.post({"type": "metrics", "step": step, "values": {"loss": 1 / step, "secret": step}}).status_code == 202


def _batch(client: Any, run: str, reads: list[str], headers: dict[str, str] | None = None) -> Any:
    return client.get(f"{API}/runs/{run}/batch", params=[("read", r) for r in reads], headers=headers or {})


@pytest.mark.parametrize("who", ["anonymous", "other", "own"])
def test_each_answer_is_its_own_gets(client: Any, tokens: dict[str, str], who: str) -> None:
    _run(client, tokens["own"], "batchrun01")
    headers = {} if who == "anonymous" else {"Authorization": f"Bearer {tokens[who]}"}
    res = _batch(client, "batchrun01", READS, headers)
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["run"] == "batchrun01" and [a["read"] for a in body["reads"]] == READS
    for answer in body["reads"]:
        alone = client.get(f"{API}/runs/batchrun01/{answer['read']}", headers=headers)
        assert (answer["status"], answer["body"]) == (alone.status_code, alone.json()), answer["read"]
    statuses = {a["read"]: a["status"] for a in body["reads"]}
    # The policy holds inside the batch: the public does not see the withheld key; the team does.
    assert statuses["metrics?key=secret&max_points=50"] == (200 if who == "own" else 404)
    assert statuses["metrics?key=nope"] == 404 and statuses["metrics?key=loss&max_points=0"] == 422
    assert res.headers["cache-control"] == ("public, max-age=1, stale-while-revalidate=1" if who == "anonymous"
                                            else "private, no-store")


def test_a_private_run_and_another_projects_run_answer_as_unknown(client: Any, tokens: dict[str, str]) -> None:
    _run(client, tokens["own"], "batchpriv1", visibility="private")
    unknown = _batch(client, "nosuchrun1", ["checkpoints"])
    for headers in ({}, {"Authorization": f"Bearer {tokens['other']}"}):
        res = _batch(client, "batchpriv1", ["checkpoints", "metrics?key=loss"], headers)
        assert (res.status_code, res.json()) == (unknown.status_code, unknown.json()) == (404, res.json())
    own = _batch(client, "batchpriv1", ["metrics?key=loss"], {"Authorization": f"Bearer {tokens['own']}"})
    assert own.status_code == 200 and own.json()["reads"][0]["status"] == 200


@pytest.mark.parametrize("reads", [
    [], ["stream"], ["broadcast/edge"], ["../other/metrics"], ["batch?read=checkpoints"], ["export?format=jsonl"],
    ["checkpoints/x/download"], ["metrics"] * 25, ["metrics?key=" + "k" * 200], ["metrics?key=a b"],
])
def test_a_read_that_is_not_a_runs_read_is_a_422_naming_it(client: Any, tokens: dict[str, str], reads: list[str]) -> None:
    _run(client, tokens["own"], "batchbad01")
    res = _batch(client, "batchbad01", reads)
    assert res.status_code == 422, res.text
    assert res.json()["error"]["field"].split(".")[0] == "read"  # "read", or "read.0": which one


def test_the_json_holds_each_answer_as_it_came(client: Any, tokens: dict[str, str]) -> None:
    """Bodies are spliced in, not parsed again: the batch stays valid JSON with non-finite values."""
    trainer = Trainer(client, tokens["own"], "batchnan01")
    assert trainer.start().status_code == 202
    assert trainer.post({"type": "metrics", "step": 1, "values": {"loss": "NaN"}}).status_code == 202
    res = _batch(client, "batchnan01", ["metrics?key=loss", "checkpoints"])
    body = json.loads(res.content)
    assert body["reads"][0]["body"]["series"][0]["last"] == ["NaN"]
