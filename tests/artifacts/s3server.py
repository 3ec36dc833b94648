"""A real S3-compatible server for the storage tests: moto's standalone server in its own process.

``MotoS3Server`` runs ``python -m moto.server`` on a free 127.0.0.1 port (a real HTTP
server speaking the S3 REST API, SigV4 and all; nothing in the app is patched) and is
stopped with its process group afterwards (``services.Process``, so a crashed session
leaks nothing either). The fixtures:

``moto_s3``   the server, started once per session
``s3``        per test: a fresh bucket on it, the AWS_* variables for it (fake keys, no
              ~/.aws files read), and ``RUNCAST_STORAGE_URL=s3://<bucket>/ckpts`` with
              ``RUNCAST_S3_ENDPOINT_URL`` set for the app
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from services import Process, ServiceError, child_env, free_port, wait_until

PREFIX = "ckpts"


class MotoS3Server:
    def __init__(self, log_dir: Path) -> None:
        try:
            import moto.server  # noqa: F401
        except ImportError as exc:  # pragma: no cover - dev extra not installed
            raise ServiceError("moto[server] is not installed: pip install -e '.[dev]'") from exc
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = Process(
            "moto-s3",
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            child_env({}),
            log_dir / "moto-s3.log",
        )

    def start(self) -> MotoS3Server:
        def up() -> bool:
            self.process.check_alive("starting")
            return httpx.get(f"{self.url}/moto-api/", timeout=1).status_code < 500

        wait_until(up, 60, f"moto S3 server on {self.url}")
        return self

    def stop(self) -> None:
        self.process.stop(timeout=5)


@dataclass
class S3Env:
    url: str  # endpoint
    bucket: str
    client: Any  # a boto3 client for the test itself
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3Server]:
    server = MotoS3Server(tmp_path_factory.mktemp("moto")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3(moto_s3: MotoS3Server, storage_root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[S3Env]:
    import boto3

    for name, value in {
        "AWS_ACCESS_KEY_ID": "runcast-test",
        "AWS_SECRET_ACCESS_KEY": "runcast-test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    bucket = f"runcast-{uuid.uuid4().hex[:12]}"
    client = boto3.session.Session().client("s3", endpoint_url=moto_s3.url, region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    monkeypatch.setenv("RUNCAST_STORAGE_URL", f"s3://{bucket}/{PREFIX}")
    monkeypatch.setenv("RUNCAST_S3_ENDPOINT_URL", moto_s3.url)
    monkeypatch.setenv("RUNCAST_S3_ADDRESSING_STYLE", "path")
    yield S3Env(moto_s3.url, bucket, client)


def record_requests(client: Any, env: S3Env) -> list[tuple[str, dict[str, Any]]]:
    """Record (operation, params) of every request the S3 client of ``client``'s app (its context's
    storage) makes from now on."""
    storage = client.app.state.context.storage

    def before_build(params: dict[str, Any], model: Any, **_: Any) -> None:
        env.requests.append((model.name, dict(params)))

    storage.client.meta.events.register("before-parameter-build.s3", before_build)  # type: ignore[attr-defined]
    return env.requests
