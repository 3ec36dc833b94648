"""TensorBoard event files and log directories, read with TensorBoard's own record reader.

Every directory holding ``*tfevents*`` files is a run (named by its path below the
directory given; identified by the name of its first event file, which holds the
creation time, host and process id, so the same run is found again from any parent
directory); its files are read in name order (the name starts with the creation
time), each record through ``tensorboard``'s ``RawEventFileLoader`` and parsed as an
``Event``. Scalars are the legacy ``simple_value`` summaries (``SummaryWriter`` of torch
and TF1) and the ``scalars`` plugin's tensor summaries (TF2, ``tensorboard.summary``);
text, images and histograms become samples and media (``tensorboard_outputs``); other
summaries (audio, PR curves, meshes) are left out. Step and wall time are the event's.

The hparams plugin's session data becomes the run's config (``SummaryWriter.add_hparams``
writes it, with the metrics it is given, into a subdirectory named by the time: such a
directory is folded into its parent run, its scalars included).

TensorBoard's reader stops silently at a damaged or cut record (the file may still be
being written); here the bytes read are compared with the file's size, and a file not
read to its end is an error naming the record.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from runcast.importers.model import ImportFailed, MissingExtra, RunBuilder, SourceRun
from runcast.importers.tensorboard_outputs import outputs_of
from runcast.wire.events import encode_value

NAME: Final = "tensorboard"
_HPARAMS_PLUGIN: Final = "hparams"
_SCALARS_PLUGIN: Final = "scalars"
_RECORD_OVERHEAD: Final = 16  # TFRecord framing: length (8), its crc (4), data crc (4)


def run_directories(root: Path) -> dict[Path, list[Path]]:
    """Directory -> its event files in name order, for ``root`` (a log directory or one event file)."""
    if root.is_file():
        return {root.parent: [root]}
    found: dict[Path, list[Path]] = {}
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        names = sorted(f for f in files if "tfevents" in f)
        if names:
            found[Path(directory)] = [Path(directory) / f for f in names]
    return found


def read(root: Path, on_points: Callable[[int], None] = lambda n: None) -> list[SourceRun]:
    reader = _Reader()
    directories = run_directories(root)
    if not directories:
        raise ImportFailed(str(root), "no TensorBoard event files (*tfevents*) here")
    loaded = {directory: reader.load(files, on_points) for directory, files in directories.items()}
    # add_hparams: a directory with session data inside another run's directory belongs to it.
    for directory in sorted(loaded, key=lambda d: len(d.parts), reverse=True):
        builder, hparams = loaded[directory]
        parent = directory.parent
        if hparams is not None and parent in loaded and loaded[parent][1] is None and directory != root:
            parent_builder, _ = loaded[parent]
            for segment in builder.segments:
                for key, series in segment.series.items():
                    for step, value, t in zip(series.steps, series.values, series.times):
                        parent_builder.add(key, step, value, t)
            loaded[parent] = (parent_builder, hparams)
            del loaded[directory]
    base = root.parent if root.is_file() else root
    runs = []
    for directory, (builder, hparams) in sorted(loaded.items()):
        relative = directory.relative_to(base).as_posix() if directory != base else directory.name
        name = relative if relative not in ("", ".") else directory.resolve().name
        runs.append(
            builder.build(
                format=NAME,
                identity=directories[directory][0].name,
                name=name,
                config=hparams or {},
                env={"imported_from": {"format": NAME, "run": name}},
            )
        )
    return runs


class _Reader:
    """TensorBoard's loader and protos, imported on first use."""

    def __init__(self) -> None:
        try:
            from tensorboard.backend.event_processing.event_file_loader import (
                RawEventFileLoader,
            )
            from tensorboard.compat.proto import event_pb2
            from tensorboard.plugins.hparams import metadata as hparams_metadata
            from tensorboard.util import tensor_util
        except ImportError:
            raise MissingExtra("TensorBoard event files", "tensorboard", "tensorboard") from None
        from google.protobuf.message import DecodeError

        self._decode_error = DecodeError
        self._loader = RawEventFileLoader
        self._event = event_pb2.Event
        self._hparams = hparams_metadata
        self._tensor = tensor_util

    def load(self, files: list[Path], on_points: Callable[[int], None]) -> tuple[RunBuilder, dict[str, Any] | None]:
        """One run directory's points (in file order) and its hparams, if any."""
        builder = RunBuilder()
        hparams: dict[str, Any] | None = None
        plugins: dict[str, str] = {}  # tag -> plugin: only a tag's first event carries its metadata
        for path in files:
            consumed = 0
            record = 0
            added = 0
            for raw in self._loader(str(path)).Load():
                record += 1
                consumed += len(raw) + _RECORD_OVERHEAD
                where = f"{path} (record {record})"
                try:
                    event = self._event.FromString(raw)
                except self._decode_error as exc:
                    raise ImportFailed(where, f"not a TensorBoard event ({exc})") from None
                if not event.HasField("summary"):
                    continue
                for value in event.summary.value:
                    plugin = value.metadata.plugin_data.plugin_name
                    if plugin:
                        plugins[value.tag] = plugin
                    if plugin == _HPARAMS_PLUGIN:
                        if value.tag == self._hparams.SESSION_START_INFO_TAG:
                            hparams = self._session_hparams(value.metadata.plugin_data.content, where)
                        continue
                    kind = value.WhichOneof("value")
                    if kind == "simple_value":
                        number = float(value.simple_value)
                    elif kind == "tensor" and plugins.get(value.tag) == _SCALARS_PLUGIN:
                        number = self._scalar(value.tensor, value.tag, where)
                    else:
                        self._outputs(builder, value, plugins.get(value.tag), event, where)
                        continue
                    try:
                        builder.add(value.tag, event.step, number, event.wall_time)
                    except ValueError as exc:
                        raise ImportFailed(where, str(exc)) from None
                    added += 1
                    if added == 10_000:
                        on_points(added)
                        added = 0
            on_points(added)
            size = path.stat().st_size
            if consumed != size:
                raise ImportFailed(
                    f"{path} (record {record + 1})",
                    f"damaged or cut off at byte {consumed} of {size}: TensorBoard's reader stops there",
                )
        return builder, hparams

    def _outputs(self, builder: RunBuilder, value: Any, plugin: str | None, event: Any, where: str) -> None:
        try:
            found = outputs_of(value, plugin, event.step, event.wall_time, self._tensor)
        except (TypeError, ValueError) as exc:
            raise ImportFailed(where, f"{value.tag!r}: {exc}") from None
        for output in found:
            builder.add_output(output)

    def _scalar(self, tensor: Any, tag: str, where: str) -> float:
        try:
            array = self._tensor.make_ndarray(tensor)
            if array.size == 1:
                return float(array.reshape(()))
        except (TypeError, ValueError) as exc:
            raise ImportFailed(where, f"scalar {tag!r} is not a number ({exc})") from None
        raise ImportFailed(where, f"scalar {tag!r} holds {array.size} values")

    def _session_hparams(self, content: bytes, where: str) -> dict[str, Any]:
        """The hparams of a session start: numbers (non-finite ones as "NaN", "Infinity"), text, booleans."""
        try:
            data = self._hparams.parse_session_start_info_plugin_data(content)
        except (self._decode_error, ValueError) as exc:
            raise ImportFailed(where, f"hparams session data that does not parse ({exc})") from None
        out: dict[str, Any] = {}
        for name, value in sorted(data.hparams.items()):
            kind = value.WhichOneof("kind")
            if kind == "number_value":
                out[name] = encode_value(value.number_value)
            elif kind in ("string_value", "bool_value"):
                out[name] = getattr(value, kind)
        return out
