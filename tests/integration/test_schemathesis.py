"""The OpenAPI document is the contract: schemathesis fuzzes a real `runcast serve` from it.

Against the live ``/openapi.json`` of an embedded server holding a public and a private run
(metrics, checkpoints, a manifest, a data mix, a note), anonymous and with the project's
token, every check schemathesis has: no 5xx, no status code or content type the schema
does not declare, every body valid against its schema (errors included: ``{"error": ...}``),
405 with a correct ``Allow`` for methods a path does not serve, and authentication that is
not ignored. Bounded: a few examples per operation and a time budget per run.

Excluded: the SSE stream (it never ends; tests/stream covers it), and the check
``positive_data_acceptance`` (it expects any schema-valid request to succeed, but a valid
run id that names no run is rightly a 404).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest
from services import BIN, child_env

from integration.test_embedded import make_token

pytestmark = pytest.mark.slow

MAX_TIME_S = 60


def _seed(url: str, token: str, storage: Path) -> dict[str, str]:
    """A public run with every artifact and a private run; returns ids for the fuzzer's parameters."""
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
        run.finish()
        ids[visibility] = run.id
    return ids


def _config(path: Path, ids: dict[str, str], cids: list[int]) -> Path:
    lines = [
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
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _fuzz(url: str, config: Path, report: Path, *headers: str) -> subprocess.CompletedProcess[str]:
    argv = [
        str(BIN / "st"), "--no-color", "--config-file", str(config), "run", f"{url}/openapi.json",
        "--checks", "all", "--exclude-checks", "positive_data_acceptance",
        # /tokens/{id}: DELETE revokes the fuzzer's own token mid-run (every later call a 401);
        # its walls and revocation are tested in tests/api/test_manage.py
        "--exclude-path-regex", "/stream$|/tokens/",
        "--max-examples", "8", "--max-time", str(MAX_TIME_S), "--seed", "7", "--workers", "1",
        # one worker: with two, hypothesis describes strategies by parsing lambdas in threads,
        # which CPython 3.11 can fail ("SystemError: AST constructor recursion depth mismatch")
        "--request-timeout", "20", "--suppress-health-check", "all",
        "--report", "junit", "--report-junit-path", str(report),
    ]  # fmt: skip
    for header in headers:
        argv += ["-H", header]
    return subprocess.run(argv, env=child_env({}), capture_output=True, text=True, timeout=MAX_TIME_S * 6,
                          cwd=config.parent, check=False)


def test_schemathesis_finds_nothing_anonymous_or_with_a_token(processes, tmp_path):
    if not (BIN / "st").exists():
        pytest.fail("schemathesis is missing: pip install 'schemathesis>=4' (the dev extra)")
    data_dir = tmp_path / "data"
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir), "RUNCAST_SUBSCRIBE_RATE_LIMIT": "1000"}
    processes.start_api()
    url = processes.api_url
    token = make_token(processes.env, "demo", data_dir)
    ids = _seed(url, token, data_dir / "storage")
    auth = {"Authorization": f"Bearer {token}"}
    cids = [c["id"] for r in ids.values()
            for c in httpx.get(f"{url}/api/v1/runs/{r}/checkpoints", headers=auth).json()["checkpoints"]]
    config = _config(tmp_path / "schemathesis.toml", ids, cids)
    for label, headers in (("anonymous", ()), ("token", (f"Authorization: Bearer {token}",))):
        started = time.monotonic()
        res = _fuzz(url, config, tmp_path / f"junit-{label}.xml", *headers)
        out = res.stdout + res.stderr
        assert res.returncode == 0, f"schemathesis ({label}) found problems:\n{out[-20000:]}"
        assert "0 failures" in out or "No issues found" in out or "passed" in out, out[-5000:]
        assert time.monotonic() - started < MAX_TIME_S * 4
    processes.processes[0].check_alive("after fuzzing")
    assert httpx.get(f"{url}/readyz").status_code == 200
