"""The OpenAPI document is the contract: schemathesis fuzzes a real `runcast serve` from it.

Against the live ``/openapi.json`` of an embedded server holding a public and a private run
(metrics, checkpoints, a manifest, a data mix, a note, samples, an evaluation, an image, a table
and a histogram), anonymous and with the project's
token, every check schemathesis has: no 5xx, no status code or content type the schema
does not declare, every body valid against its schema (errors included: ``{"error": ...}``;
the live stream's messages too, the first of each stream), 405 with a correct ``Allow`` for
methods a path does not serve, authentication that is not ignored, schema-invalid requests
refused, and schema-valid ones accepted: the document states the rules the server enforces
(issue 23). Those it cannot state, between two values or about the server's state, are
kept by the positive cases through schemathesis_hooks.py. Bounded: a few examples per
operation and a time budget per run.

The failures are counted by code from schemathesis' JSON report; ST202 (schema-valid request
rejected) and ST108 (response, or stream message, violates its schema) are named in the
assertion, and any other failure fails the test as well.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from services import BIN, child_env, free_port

from integration.test_embedded import make_token

pytestmark = pytest.mark.slow

MAX_TIME_S = 60
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
STREAM = "GET /api/v1/runs/{run_id}/stream"
COUNTED = ("ST202", "ST108")  # schema-valid request rejected; response (or stream message) violates its schema


def _seed(url: str, token: str, storage: Path) -> dict[str, str]:
    """A public run with every artifact and a private run; returns ids for the fuzzer's parameters."""
    import numpy
    import runcast

    ckpt = storage / "demo" / "seed" / "step10.pt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"weights" * 100)
    ids: dict[str, str] = {}
    for name, visibility in (("fuzzed", "public"), ("hidden", "private")):
        run = runcast.init("demo", name, config={"lr": 3e-4, "layers": 2}, server=url, token=token,
                           visibility=visibility, capture_code=False, flush_interval=0.05)
        for step in range(1, 21):
            run.log({"loss": 2.0 / step, "lr": 3e-4}, step=step)
        run.data_mix({"web": 0.7, "code": 0.3}, step=1)
        run.manifest({"sources": {"web": {"tokens": 100}}}, version="v1", step=1)
        run.manifest({"sources": {"web": {"tokens": 200}}}, version="v2", step=15)
        run.note("halfway", step=10)
        run.checkpoint(ckpt, step=10, metrics={"val/loss": 0.5})
        # What the model says and scores (docs/samples.md): every read of them answers with data.
        run.log_samples([{"prompt": "The capital of France is", "output": " Paris", "scores": {"bleu": 0.5}},
                         {"prompt_id": "story", "prompt": "Once", "output": " upon", "reference": " a time"}], step=10)
        run.log_eval({"hellaswag": {"acc,none": 0.31}}, step=10, suite="lm-eval-harness", checkpoint=10, n=8)
        run.log_media("val/worst", runcast.Table(columns=["prompt", "loss"], rows=[["a", 3.1], ["b", None]]), step=10)
        run.log_media("weights", runcast.Histogram([0.1, 0.2, float("nan")], bins=4), step=10)
        run.log_media("gen/grid", runcast.Image(numpy.full((4, 6, 3), 200, dtype=numpy.uint8)), step=10)
        run.finish()
        ids[visibility] = run.id
    return ids


def _config(path: Path, ids: dict[str, str], cids: list[int]) -> Path:
    lines = [
        f"hooks = {str(HOOKS)!r}".replace("'", '"'),
        "[dictionaries.run_ids]",
        f"values = {[ids['public'], ids['private'], 'unknownrun0000000']!r}".replace("'", '"'),
        "[dictionaries.cids]",
        f"values = {cids + [999999]!r}",
        "[parameters]",
        '"path.run_id" = { dictionary = "run_ids", probability = 0.9 }',
        '"path.cid" = { dictionary = "cids", probability = 0.9 }',
        '"query.key" = "loss"',
        '"query.from" = "v1"',
        '"query.to" = "v2"',
        '"path.version" = "v1"',
        '"path.project" = "demo"',
        # A body over a limit of the server (an upload manifest declaring more bytes than it takes)
        # is refused 413 whatever else is wrong in it: a rejection, as 422 is.
        "[checks.negative_data_rejection]",
        'expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]',
        # The stream never ends: its first message (reset, or the first replayed batch) is checked,
        # and a stream with nothing to send yet is left after 2 s.
        "[[operations]]",
        f'include-name = "{STREAM}"',
        "max-stream-events = 1",
        "request-timeout = 2",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _fuzz(url: str, config: Path, report: Path, *headers: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    """Run schemathesis; its output and its JSON report."""
    argv = [
        str(BIN / "st"), "--no-color", "--config-file", str(config), "run", f"{url}/openapi.json",
        "--checks", "all",
        # /tokens/{id}: DELETE revokes the fuzzer's own token mid-run (every later call a 401);
        # its walls and revocation are tested in tests/api/test_manage.py
        "--exclude-path-regex", "/tokens/",
        "--max-examples", "8", "--max-time", str(MAX_TIME_S), "--seed", "7", "--workers", "1",
        # one worker: with two, hypothesis describes strategies by parsing lambdas in threads,
        # which CPython 3.11 can fail ("SystemError: AST constructor recursion depth mismatch")
        "--request-timeout", "20", "--suppress-health-check", "all",
        "--report", "json", "--report-json-path", str(report),
    ]  # fmt: skip
    for header in headers:
        argv += ["-H", header]
    res = subprocess.run(argv, env=child_env({}), capture_output=True, text=True, timeout=MAX_TIME_S * 6,
                         cwd=config.parent, check=False)
    return res, json.loads(report.read_text())


def _failures(report: dict[str, Any]) -> Counter[str]:
    """Failures by code (``ST202``: 3), from the report's groups of unique failures."""
    counts: Counter[str] = Counter()
    for group in report["failures"]:
        counts[group["code"]] += group["count"]
    return counts


def test_schemathesis_finds_nothing_anonymous_or_with_a_token(processes, tmp_path):
    if not (BIN / "st").exists():
        pytest.fail("schemathesis is missing: pip install 'schemathesis>=4' (the dev extra)")
    from aiosmtpd.controller import Controller

    class Sink:  # email subscriptions are on, as on a server with SMTP set up
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            return "250 OK"

    smtp_port = free_port()
    smtp = Controller(Sink(), hostname="127.0.0.1", port=smtp_port)
    smtp.start()
    try:
        _fuzz_both(processes, tmp_path, {"RUNCAST_SMTP_HOST": "127.0.0.1", "RUNCAST_SMTP_PORT": str(smtp_port)})
    finally:
        smtp.stop()


def _fuzz_both(processes: Any, tmp_path: Path, env: dict[str, str]) -> None:
    data_dir = tmp_path / "data"
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir), "RUNCAST_SUBSCRIBE_RATE_LIMIT": "1000",
                     "RUNCAST_WEBHOOK_ALLOW_CIDRS": "127.0.0.1/32", **env}
    processes.start_api()
    url = processes.api_url
    token = make_token(processes.env, "demo", data_dir)
    ids = _seed(url, token, data_dir / "storage")
    auth = {"Authorization": f"Bearer {token}"}
    cids = [c["id"] for r in ids.values()
            for c in httpx.get(f"{url}/api/v1/runs/{r}/checkpoints", headers=auth, timeout=30).json()["checkpoints"]]
    public = f"{url}/api/v1/runs/{ids['public']}"
    assert [len(httpx.get(f"{public}/{path}", timeout=30).json()[name]) for path, name in (
        ("samples", "samples"), ("evals", "evals"), ("media", "media"))] == [2, 1, 3]  # the fuzzer reads data
    config = _config(tmp_path / "schemathesis.toml", ids, cids)
    for label, headers in (("anonymous", ()), ("token", (f"Authorization: Bearer {token}",))):
        started = time.monotonic()
        res, report = _fuzz(url, config, tmp_path / f"report-{label}.json", *headers)
        out = res.stdout + res.stderr
        failures = _failures(report)
        print(f"schemathesis ({label}): {report['test_cases']['generated']} cases, failures by code: "
              + ", ".join(f"{code} {failures[code]}" for code in COUNTED) + f"; all: {dict(failures)}")
        assert {code: failures[code] for code in COUNTED} == dict.fromkeys(COUNTED, 0), out[-20000:]
        assert res.returncode == 0 and not failures, f"schemathesis ({label}) found problems:\n{out[-20000:]}"
        assert report["operations"]["tested"] == report["operations"]["selected"], report["operations"]
        assert time.monotonic() - started < MAX_TIME_S * 4
    processes.processes[0].check_alive("after fuzzing")
    assert httpx.get(f"{url}/readyz", timeout=30).status_code == 200
