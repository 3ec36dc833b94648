"""An honest contract: what the OpenAPI document declares is what the API does.

Every error response is declared with the real error schema (``{"error": {...}}``, never
FastAPI's HTTPValidationError); the bearer scheme is declared, required on writes and
optional on reads; a method a path does not serve is a 405 whose ``Allow`` lists exactly
the documented methods; errors are JSON everywhere, a crash included; chunked bodies over
the limit are a 413 naming the field; CSV exports cannot carry spreadsheet formulas.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
WRITES = {("post", "/api/v1/ingest"), ("put", "/api/v1/runs/{run_id}/alerts/config"),
          ("get", "/api/v1/whoami"),  # whoami: the SDK's start check, a token of the writing project
          ("post", "/api/v1/runs/{run_id}/uploads"), ("put", "/api/v1/runs/{run_id}/uploads/{upload_id}/files/{index}"),
          ("post", "/api/v1/runs/{run_id}/uploads/{upload_id}/complete"),
          ("patch", "/api/v1/runs/{run_id}"), ("delete", "/api/v1/runs/{run_id}"),
          ("put", "/api/v1/runs/{run_id}/segments/{segment}/spool"),  # the trainer's spool report
          # images of runs: the trainer's upload, and its question whether the server holds them
          ("put", "/api/v1/runs/{run_id}/blobs/{sha256}"), ("head", "/api/v1/runs/{run_id}/blobs/{sha256}"),
          ("get", "/api/v1/tokens"), ("delete", "/api/v1/tokens/{token_id}"),
          # the publication policy: a token of the run's (project's) project, reading or changing it
          ("get", "/api/v1/runs/{run_id}/policy"), ("put", "/api/v1/runs/{run_id}/policy"),
          ("get", "/api/v1/projects/{project}/policy"), ("put", "/api/v1/projects/{project}/policy"),
          ("post", "/api/v1/runs/{run_id}/commands")}  # the team's command to the trainer (docs/commands.md)
# /api/v1/session: sign-in takes the token in its body; its GET and DELETE use the session cookie only.
NO_TOKEN = {"/healthz", "/readyz", "/api/v1/estimate", "/api/v1/projects/{project}/alerts.atom", "/api/v1/storage",
            "/api/v1/session",
            # people sign in with a password or their OpenID Connect provider, never a token (docs/auth.md)
            "/api/v1/session/password", "/api/v1/session/providers", "/api/v1/session/oidc/{provider}/login",
            "/api/v1/session/oidc/{provider}/callback"}


@pytest.fixture
def doc(client: Any) -> dict[str, Any]:
    return client.get("/openapi.json").json()


def test_every_error_response_declares_the_error_schema(doc):
    assert "HTTPValidationError" not in json.dumps(doc)
    assert doc["components"]["schemas"]["ErrorBody"]["required"] == ["error"]
    operations = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            operations += 1
            codes = {int(c) for c in op["responses"] if c.isdigit()}
            for code in codes:
                if code < 400:
                    continue
                content = op["responses"][str(code)]["content"]
                expected = "Readiness" if path == "/readyz" else "ErrorBody"
                assert content == {"application/json": {"schema": {"$ref": f"#/components/schemas/{expected}"}}}, (
                    method, path, code)
            if path.startswith("/api/"):
                assert {413, 503} <= codes, (method, path)  # the body limit and a dependency down
            if op.get("parameters") or op.get("requestBody"):
                assert 422 in codes, (method, path)
            if "{run_id}" in path:
                assert {401, 404} <= codes, (method, path)
    assert operations >= 30


def test_bearer_scheme_required_on_writes_optional_on_reads(doc):
    assert doc["components"]["securitySchemes"] == {"bearer": {
        "type": "http", "scheme": "bearer", "description": doc["components"]["securitySchemes"]["bearer"]["description"]}}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            header_params = [p["name"].lower() for p in op.get("parameters", []) if p["in"] == "header"]
            assert "authorization" not in header_params, (method, path)
            if (method, path) in WRITES or path.startswith("/api/v1/admin/"):  # admin: an admin token
                assert op["security"] == [{"bearer": []}], (method, path)
                assert 401 in {int(c) for c in op["responses"]}
            elif path in NO_TOKEN or path.startswith("/api/v1/subscriptions/"):
                assert "security" not in op, (method, path)
            else:
                assert op["security"] == [{}, {"bearer": []}], (method, path)


def test_every_path_answers_undocumented_methods_with_405_and_the_right_allow(client, doc):
    checked = 0
    for path, item in doc["paths"].items():
        url = (path.replace("{run_id}", "contractrun001").replace("{cid}", "1").replace("{comment_id}", "1").replace("{rid}", "1")
               .replace("{subscription_id}", "1").replace("{token_id}", "1").replace("{version}", "v1").replace("{project}", "demo"))
        allowed = {m.upper() for m in item}
        for method in METHODS:
            if method in allowed:
                continue
            res = client.request(method, url)
            assert res.status_code == 405, (method, path, res.status_code)
            assert set(res.headers["allow"].split(", ")) == allowed, (method, path, res.headers["allow"])
            if method != "HEAD":
                assert res.json() == {"error": {"message": "Method Not Allowed"}}
            checked += 1
    assert checked >= 100


def test_errors_are_json_everywhere(client, monkeypatch):
    from fastapi.testclient import TestClient
    from runcast_server.runs import queries as runs

    for url in ("/nowhere", "/api/v1/nowhere", "/api/v1/runs/x"):
        res = client.get(url)
        assert res.status_code == 404 and res.headers["content-type"] == "application/json"
        assert res.json()["error"]["message"]

    def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom /secret/path")

    monkeypatch.setattr(runs, "list_runs", crash)
    quiet = TestClient(client.app, raise_server_exceptions=False)
    res = quiet.get("/api/v1/runs")
    assert res.status_code == 500 and res.headers["content-type"] == "application/json"
    assert res.json() == {"error": {"message": "internal server error"}}  # nothing of the exception


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/api/v1/subscriptions"),
    ("PUT", "/api/v1/runs/contractrun001/alerts/config"),
    ("POST", "/api/v1/ingest"),
])
def test_chunked_body_over_the_limit_is_413_naming_the_body(client, seed, method, path):
    token = seed.token("demo")
    size = 10 << 20  # over both limits (64 KiB, and 8 MiB for ingest)

    def chunks() -> Any:
        for _ in range(size >> 16):
            yield b" " * (1 << 16)

    res = client.request(method, path, content=chunks(),
                         headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert res.status_code == 413, res.text
    assert res.json()["error"]["field"] == "body"


def test_csv_export_neutralises_formula_cells_and_keeps_numbers(client, seed):
    from runcast_server.metrics.export_text import csv_text

    hostile = ["=cmd|' /C calc'!A0", "+SUM(1,2)", "-2+3", "@SUM(A1)", "plain/loss"]
    sim = seed.run("demo").start()
    sim.log({k: [(1, -1.5), (2, -2e-9)] for k in hostile})
    res = client.get(f"/api/v1/runs/{sim.run}/export", params={"format": "csv"})
    rows = list(csv.reader(io.StringIO(res.text)))
    assert rows[0] == ["segment", "key", "step", "value", "time"]
    keys = {r[1] for r in rows[1:]}
    assert keys == {"'=cmd|' /C calc'!A0", "'+SUM(1,2)", "'-2+3", "'@SUM(A1)", "plain/loss"}
    assert {r[3] for r in rows[1:]} == {"-1.5", "-2e-09"}  # negative numbers stay numbers
    jsonl = [json.loads(line) for line in client.get(f"/api/v1/runs/{sim.run}/export").text.splitlines()]
    assert {r["key"] for r in jsonl} == set(hostile)  # JSONL is exact
    for cell, safe in (("\tx", "'\tx"), ("\rx", "'\rx"), ("a=b", "a=b"), ("", "")):
        assert csv_text(cell) == safe
