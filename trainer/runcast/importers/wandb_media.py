"""W&B media of a history row as media events (``wandb_offline`` finds them).

W&B's reader prints a logged object flattened: ``key._type`` and ``key.<field>`` (the
object's fields), beside the row's numbers. The files an object names are in the run
directory's ``files/`` (the ``path`` W&B gives is relative to it):

* ``image-file`` (``wandb.Image``): its ``path``, ``caption`` -> a media image under the key;
* ``images/separated`` (a list of ``wandb.Image``): its ``filenames`` (and ``captions``) -> one
  media image each, under ``key/0``, ``key/1``, ...;
* ``table-file`` (``wandb.Table``): the JSON file at ``path`` (``columns``, ``data``) -> a
  media table;
* ``histogram`` (``wandb.Histogram``): ``bins`` (the edges) and ``values`` (the counts) -> a
  media histogram.

Other kinds (audio, video, HTML, 3D objects, plots) are left out, as text values are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runcast.importers import source_outputs
from runcast.importers.model import Output


def objects(item: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The logged objects of a history row: key -> its fields (``_type`` included)."""
    keys = sorted((k.removesuffix("._type") for k in item if k.endswith("._type")), key=len, reverse=True)
    found: dict[str, dict[str, Any]] = {}
    for name, value in item.items():
        owner = next((k for k in keys if name.startswith(k + ".")), None)
        if owner is not None:
            found.setdefault(owner, {})[name[len(owner) + 1 :]] = value
    return found


def outputs(run_dir: Path, step: int, ts: float, key: str, fields: dict[str, Any]) -> list[Output]:
    """The media events of one object; [] for a kind left out. ValueError naming what is wrong."""
    kind = fields.get("_type")
    files = run_dir / "files"
    caption = fields.get("caption") if isinstance(fields.get("caption"), str) else None
    if kind == "image-file":
        return [source_outputs.image(step, key, _file(files, fields.get("path")), ts, caption)]
    if kind == "images/separated":
        names = fields.get("filenames") or []
        captions = fields.get("captions") or [None] * len(names)
        return [source_outputs.image(step, f"{key}/{i}", _file(files, name), ts, text if isinstance(text, str) else None)
                for i, (name, text) in enumerate(zip(names, captions))]
    if kind == "table-file":
        table = json.loads(_file(files, fields.get("path")).read_text(encoding="utf-8"))
        if not isinstance(table, dict):
            raise ValueError(f"table {key!r}: its file is not a JSON object")
        return [source_outputs.table(step, key, table.get("columns") or [], table.get("data") or [], ts)]
    if kind == "histogram":
        return [source_outputs.histogram(step, key, fields.get("bins") or [], fields.get("values") or [], ts)]
    return []


def _file(files: Path, name: Any) -> Path:
    path = files / str(name)
    if not isinstance(name, str) or not path.resolve().is_relative_to(files.resolve()):
        raise ValueError(f"a media file path outside the run's files: {name!r}")
    if not path.is_file():
        raise ValueError(f"the run's file {path} is missing")
    return path
