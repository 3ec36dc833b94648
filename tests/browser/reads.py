"""The run page's reads as a test sees them on the wire: a read goes alone (``GET /runs/{id}/metrics?...``)
or inside a batch (``GET /runs/{id}/batch?read=metrics?...``, frontend/js/batch.js)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit


def reads_of(url: str) -> list[str]:
    """The reads a request makes, each as the URL of its own GET: ``url`` itself, or each of a batch's."""
    parts = urlsplit(url)
    if not parts.path.endswith("/batch"):
        return [url]
    base = f"{parts.scheme}://{parts.netloc}{parts.path.removesuffix('batch')}"
    return [base + value for name, value in parse_qsl(parts.query) if name == "read"]


def metrics_reads(url: str) -> list[str]:
    """The ``/metrics`` reads a request makes (none, one, or a batch's)."""
    return [u for u in reads_of(url) if "/metrics?" in u]


def key_reads(url: str, key: str) -> list[str]:
    """The ``/metrics`` reads of ``key`` a request makes. A test that asks "was this key read again?"
    names the key: the SDK's system metrics may start after the page opened, and their new keys are
    rightly read once."""
    return [u for u in metrics_reads(url) if ("key", key) in parse_qsl(urlsplit(u).query)]


def rewrite_read(page: Any, name: str, change: Callable[[Any], None]) -> None:
    """Route the page's reads of ``name`` (``revisions``), alone or in a batch, through ``change(body)``."""

    def alone(route: Any) -> None:
        body = route.fetch().json()
        change(body)
        route.fulfill(json=body)

    def batched(route: Any) -> None:
        body = route.fetch().json()
        for answer in body["reads"]:
            if answer["read"] == name and answer["status"] == 200:
                change(answer["body"])
        route.fulfill(json=body)

    page.route(f"**/api/v1/runs/*/{name}", alone)
    page.route("**/api/v1/runs/*/batch?*", batched)
