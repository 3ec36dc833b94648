"""An MLflow run's text and image artifacts as samples and media (``mlflow_runs`` reads them).

Every artifact of the run is listed (``MlflowClient.list_artifacts``, recursively) and the
ones below are downloaded into a temporary directory:

* ``mlflow.log_image(image, key=..., step=...)``: ``images/<key>+step+<step>+timestamp+<ms>+<uuid>.png``
  (``%`` for ``+`` and ``#`` for ``/`` in the key before MLflow 3) -> a media image under the
  key at that step and time; MLflow's ``+compressed.webp`` copy is left out.
* Any other ``.png``, ``.jpg``, ``.jpeg``, ``.gif``, ``.webp`` or ``.bmp`` file
  (``log_image(image, "dir/file.png")``, ``log_artifact``) -> a media image; ``.txt`` and
  ``.md`` files (``log_text``) -> a sample under the key ``samples``. Such an artifact has no
  step of its own: its step is the number after the last ``step`` in its path (``step_100``,
  ``step-100``, ``step=100``, ``step100``; else 0), and its name (a sample's prompt id, an
  image's key) is its path with that number left out (``samples/step_100/p1.txt`` and
  ``samples/step_200/p1.txt`` are one prompt, ``samples/step/p1.txt``); an image's name also
  loses its extension.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any, Final

from runcast.importers import source_outputs
from runcast.importers.model import Output

IMAGE_SUFFIXES: Final = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp"})
TEXT_SUFFIXES: Final = frozenset({".txt", ".md"})
_KEYED: Final = re.compile(
    r"^images/(?P<key>.+?)[+%]step[+%](?P<step>\d+)[+%]timestamp[+%](?P<ms>\d+)[+%][0-9a-fA-F-]+\.png$")
_STEP: Final = re.compile(r"step[_=-]?(\d+)", re.IGNORECASE)


def outputs(client: Any, run_id: str) -> list[Output]:
    """The run's samples and media, in artifact path order. ValueError naming the artifact when one is not
    what its name says (an image that does not decode)."""
    wanted = [path for path in _listed(client, run_id, None) if _kind(path) is not None]
    if not wanted:
        return []
    found = []
    with tempfile.TemporaryDirectory(prefix="runcast-mlflow-") as tmp:
        for path in wanted:
            local = Path(client.download_artifacts(run_id, path, tmp))
            try:
                found.append(_output(path, local))
            except (UnicodeDecodeError, ValueError) as exc:
                raise ValueError(f"artifact {path!r}: {exc}") from None
    return found


def step_and_name(path: str) -> tuple[int, str]:
    """The step a path names (0 when none) and the path with it left out (see the module)."""
    matches = list(_STEP.finditer(path))
    if not matches:
        return 0, path
    last = matches[-1]
    return int(last.group(1)), path[: last.start()] + "step" + path[last.end() :]


def _listed(client: Any, run_id: str, path: str | None) -> Iterator[str]:
    for info in sorted(client.list_artifacts(run_id, path), key=lambda i: i.path):
        if info.is_dir:
            yield from _listed(client, run_id, info.path)
        else:
            yield info.path


def _kind(path: str) -> str | None:
    suffix = PurePosixPath(path).suffix.lower()
    if _KEYED.match(path) or (suffix in IMAGE_SUFFIXES and "+compressed" not in path and "%compressed" not in path):
        return "image"
    return "text" if suffix in TEXT_SUFFIXES else None


def _output(path: str, local: Path) -> Output:
    keyed = _KEYED.match(path)
    if keyed is not None:
        key = keyed.group("key").replace("~", "/").replace("#", "/")
        return source_outputs.image(int(keyed.group("step")), key, local.read_bytes(), int(keyed.group("ms")) / 1000.0)
    step, name = step_and_name(path)
    if _kind(path) == "image":
        return source_outputs.image(step, str(PurePosixPath(name).with_suffix("")), local.read_bytes())
    return source_outputs.sample(step, name, local.read_text(encoding="utf-8"))
