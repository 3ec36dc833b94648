"""Fixtures of the topology tests: nginx in front of Runcast processes."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from conftest import attach_log

from topology.nginx import Nginx


@pytest.fixture
def files_root() -> Iterator[Path]:
    """A storage root nginx (run as ``nobody``) can read: pytest's tmp dirs are private to root."""
    import shutil

    root = Path(tempfile.mkdtemp(prefix="runcast-files-"))
    os.chmod(root, 0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def start_nginx(request: pytest.FixtureRequest, tmp_path: Path, files_root: Path) -> Iterator[Callable[[Sequence[str]], Nginx]]:
    """``start_nginx(api_urls)``: nginx from deploy/nginx/runcast.conf.template in front of them."""
    started: list[Nginx] = []

    def start(api_urls: Sequence[str]) -> Nginx:
        proxy = Nginx(api_urls, files_root, tmp_path / "logs")
        started.append(proxy)
        attach_log(request, "nginx", proxy.log_path)
        attach_log(request, "nginx error", proxy.prefix / "error.log")
        return proxy.start()

    try:
        yield start
    finally:
        for proxy in started:
            proxy.stop()
