"""``runcast export RUN --what media -o DIR``: a run's images as files and every media row in a manifest.

``DIR/manifest.jsonl`` holds one line per media row, oldest step first, as the API lists them
(id, segment, step, key, kind, caption and the kind's fields: an image's size and type, a table's
columns and rows, a histogram's edges and counts); an image's line names its file,
``images/<sha256>.png`` (or ``.jpg``), written once per distinct image and checked against its
SHA-256. The manifest is written whole or not at all (``manifest.jsonl.part`` until the end).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Final

import httpx

from runcast.cli.progress import Bars

PAGE: Final = 1000
SUFFIX: Final = {"image/png": ".png", "image/jpeg": ".jpg"}


class ExportFailed(RuntimeError):
    """The server answered with an error (``status``) or sent bytes that are not the image it named."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def export_media(client: httpx.Client, base: str, run: str, key: str | None, directory: Path, bars: Bars) -> int:
    """Write the run's media into ``directory``; returns how many rows the manifest holds."""
    images = directory / "images"
    images.mkdir(parents=True, exist_ok=True)
    partial = directory / "manifest.jsonl.part"
    bar = bars.task("media", total=None, unit="rows")
    rows = 0
    try:
        with partial.open("w", encoding="utf-8") as manifest:
            for item in _pages(client, base, run, key):
                if item["kind"] == "image":
                    item["file"] = _image_file(client, base, item, images)
                manifest.write(json.dumps(item, ensure_ascii=False, allow_nan=False) + "\n")
                rows += 1
                bars.advance(bar, 1)
        partial.replace(directory / "manifest.jsonl")
    finally:
        if partial.exists():
            partial.unlink()
    bars.finish(bar, rows)
    return rows


def _pages(client: httpx.Client, base: str, run: str, key: str | None) -> Any:
    after: str | None = None
    while True:
        params = {"limit": str(PAGE), **({"key": key} if key else {}), **({"after": after} if after else {})}
        response = client.get(f"{base}/api/v1/runs/{run}/media", params=params)
        if response.status_code >= 400:
            raise ExportFailed(f"{response.url} answered {response.status_code}", response.status_code)
        page = response.json()
        if page.get("withheld"):
            raise ExportFailed("the run's publication policy withholds its media from this reader", 403)
        yield from page["media"]
        after = page.get("next_cursor")
        if not after:
            return


def _image_file(client: httpx.Client, base: str, item: dict[str, Any], images: Path) -> str:
    name = item["blob"] + SUFFIX.get(item["content_type"], "")
    target = images / name
    if not (target.exists() and target.stat().st_size == item["size"]):
        response = client.get(base + item["image_url"])
        if response.status_code >= 400:
            raise ExportFailed(f"{response.url} answered {response.status_code}", response.status_code)
        if hashlib.sha256(response.content).hexdigest() != item["blob"]:
            raise ExportFailed(f"image {item['id']}: the bytes are not the image the server named ({item['blob']})")
        temporary = target.with_name(target.name + ".part")
        temporary.write_bytes(response.content)
        temporary.replace(target)
    return f"images/{name}"
