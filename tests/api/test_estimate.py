"""``GET /api/v1/estimate``: the same figures as ``runcast estimate`` (one implementation),
checked on the ZeRO paper's example (Ψ = 7.5B, N = 64), and query validation naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from runcast.cli.main import app
from runcast.estimate import GB, estimate
from typer.testing import CliRunner


def cli_json(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["estimate", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


@pytest.mark.parametrize("stage, expected_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_paper_example_equals_the_cli(client: Any, stage: int, expected_gb: float) -> None:
    res = client.get("/api/v1/estimate", params={"params": "7.5e9", "gpus": 64, "zero": stage})
    assert res.status_code == 200, res.text
    body = res.json()
    assert body == cli_json("--params", "7.5e9", "--gpus", "64", "--zero", str(stage))
    assert round(body["bytes"]["total"] / GB, 1) == expected_gb
    assert body["zero_stage"] == stage and body["gpus"] == 64 and body["shape"]["assumed"] is True


def test_offload_and_shape_equal_the_cli(client: Any) -> None:
    query = {"params": "7e9", "gpus": 8, "zero": 2, "offload_optimizer": "true", "layers": 32, "hidden": 4096,
             "heads": 32, "seq_len": 4096, "micro_batch": 2, "checkpoint_activations": "true"}
    body = client.get("/api/v1/estimate", params=query).json()
    assert body == cli_json("--params", "7e9", "--gpus", "8", "--zero", "2", "--offload-optimizer", "--layers", "32",
                            "--hidden", "4096", "--heads", "32", "--seq-len", "4096", "--micro-batch", "2",
                            "--checkpoint-activations")
    assert body == estimate(7e9, 8, 2, True, layers=32, hidden=4096, heads=32, seq_len=4096, micro_batch=2,
                            checkpointing=True)
    assert body["bytes"]["optimizer"] == 0 and body["bytes"]["cpu_optimizer"] == pytest.approx(10.5e9)


@pytest.mark.parametrize("query, field", [
    ({}, "params"),
    ({"params": "0"}, "params"),
    ({"params": "-1"}, "params"),
    ({"params": "nan"}, "params"),
    ({"params": "inf"}, "params"),
    ({"params": "seven"}, "params"),
    ({"params": "7e9", "gpus": "0"}, "gpus"),
    ({"params": "7e9", "gpus": "1.5"}, "gpus"),
    ({"params": "7e9", "zero": "4"}, "zero"),
    ({"params": "7e9", "zero": "-1"}, "zero"),
    ({"params": "7e9", "offload_optimizer": "maybe"}, "offload_optimizer"),
    ({"params": "7e9", "zero": "0", "offload_optimizer": "true"}, "offload_optimizer"),
    ({"params": "7e9", "layers": "0"}, "layers"),
    ({"params": "7e9", "seq_len": "x"}, "seq_len"),
])
def test_bad_query_is_422_naming_the_field(client: Any, query: dict[str, str], field: str) -> None:
    res = client.get("/api/v1/estimate", params=query)
    assert res.status_code == 422, res.text
    assert res.json()["error"]["field"] == field
    assert res.json()["error"]["message"]


def test_listed_in_openapi(client: Any) -> None:
    assert "/api/v1/estimate" in client.get("/openapi.json").json()["paths"]
