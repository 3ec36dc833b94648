"""Other tools' text, images, tables and histograms as ``Output`` events, checked as the SDK's are.

Each maker returns an ``Output`` whose body the wire takes (``model_outputs``), or raises
ValueError saying what is wrong (the reader names the file and record). What the wire cannot
hold is made to fit, the same way for every format (docs/import.md): text with a NUL or a lone
surrogate gets U+FFFD in its place; a prompt, output or caption longer than the wire's limit is
clipped, ending in "…"; an image of a format other than PNG or JPEG is converted to PNG
(Pillow); a histogram keeps its bins from the first to the last that counts something, and
more than 512 of them are merged in equal runs.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from runcast import images
from runcast.importers.model import Blob, Output
from runcast.outputs import prompt_id as hashed_prompt_id
from runcast.wire.checks import EventError
from runcast.wire.limits import (
    MAX_CAPTION_CHARS,
    MAX_HISTOGRAM_BINS,
    MAX_OUTPUT_CHARS,
    MAX_PROMPT_CHARS,
    MAX_PROMPT_ID_CHARS,
)
from runcast.wire.model_outputs import media_body, sample_body

SAMPLES_KEY: Final = "samples"  # the key samples of other tools are kept under (the SDK's default)
_CLIPPED: Final = "…"


def text(raw: str, limit: int) -> str:
    """``raw`` as wire text of at most ``limit`` characters."""
    if "\x00" in raw or not raw.isascii():
        raw = raw.encode("utf-16", "surrogatepass").decode("utf-16", "replace").replace("\x00", "\ufffd")
    return raw if len(raw) <= limit else raw[: limit - 1] + _CLIPPED


def sample(step: int, name: str, output: str, ts: float = math.nan, *, prompt: str | None = None,
           key: str = SAMPLES_KEY) -> Output:
    """A text as a sample: ``name`` (a tag, a file's path) is its prompt id and, without ``prompt``, its prompt."""
    prompt = text(name if prompt is None else prompt, MAX_PROMPT_CHARS)
    label = text(name, MAX_PROMPT_ID_CHARS)
    body = {"step": step, "key": key, "prompt": prompt, "output": text(output, MAX_OUTPUT_CHARS),
            "prompt_id": label if label.strip() and label.isprintable() and _CLIPPED not in label
            else hashed_prompt_id(name)}
    return Output("sample", _checked(sample_body, body), ts)


def image(step: int, key: str, data: bytes | Path, ts: float = math.nan, caption: str | None = None) -> Output:
    """An image file's bytes (or the file) as a media image, with the blob to upload."""
    raw = data.read_bytes() if isinstance(data, Path) else data
    try:
        made = images.encoded(raw)
    except images.ImageError as exc:
        raise ValueError(f"image {key!r} at step {step}: {exc}") from None
    sha256 = hashlib.sha256(made.data).hexdigest()
    kept = made.data
    load = (lambda: data.read_bytes()) if isinstance(data, Path) and made.data == raw else (lambda: kept)
    body = _media(step, key, caption, {"kind": "image", "blob": sha256, "content_type": made.content_type,
                                       "width": made.width, "height": made.height, "size": len(made.data)})
    return Output("media", body, ts, Blob(sha256, made.content_type, load))


def table(step: int, key: str, columns: Sequence[Any], rows: Sequence[Sequence[Any]], ts: float = math.nan,
          caption: str | None = None) -> Output:
    """A table: its columns' names and rows of cells (text, numbers, booleans, null)."""
    cells = [[text(c, 10_000) if isinstance(c, str) else c for c in row] for row in rows]
    return Output("media", _media(step, key, caption, {"kind": "table", "columns": [str(c) for c in columns],
                                                       "rows": cells}), ts)


def histogram(step: int, key: str, edges: Sequence[float], counts: Sequence[float], ts: float = math.nan, *,
              nan: float | None = None) -> Output:
    """A histogram's bins (``len(edges) == len(counts) + 1``), trimmed and merged to fit (see the module)."""
    fitted_edges, fitted_counts = fit_bins(list(edges), list(counts))
    fields: dict[str, Any] = {"kind": "histogram", "edges": fitted_edges, "counts": fitted_counts}
    if nan:
        fields["nan"] = nan
    return Output("media", _media(step, key, None, fields), ts)


def fit_bins(edges: list[float], counts: list[float]) -> tuple[list[float], list[float]]:
    """Bins from the first to the last that counts something (all of them when none does), at most 512."""
    if len(edges) != len(counts) + 1 or not counts:
        raise ValueError(f"a histogram needs one more edge than counts, got {len(edges)} and {len(counts)}")
    used = [i for i, c in enumerate(counts) if c]
    if used:
        first, last = used[0], used[-1]
        edges, counts = edges[first : last + 2], counts[first : last + 1]
    if len(counts) > MAX_HISTOGRAM_BINS:
        width = math.ceil(len(counts) / MAX_HISTOGRAM_BINS)
        counts = [sum(counts[i : i + width]) for i in range(0, len(counts), width)]
        edges = edges[::width] if (len(edges) - 1) % width == 0 else [*edges[::width], edges[-1]]
    return edges, counts


def _media(step: int, key: str, caption: str | None, fields: dict[str, Any]) -> dict[str, Any]:
    body = {"step": step, "key": key, **fields}
    if caption:
        body["caption"] = text(caption, MAX_CAPTION_CHARS)
    return _checked(media_body, body)


def _checked(check: Any, body: dict[str, Any]) -> dict[str, Any]:
    try:
        checked: dict[str, Any] = check(body)
    except EventError as exc:
        raise ValueError(str(exc)) from None
    return checked
