"""TensorBoard's text, image and histogram summaries as samples and media (``tensorboard_logs`` reads them).

* Text (the ``text`` plugin: ``SummaryWriter.add_text``, ``tf.summary.text``): one sample per
  event under the key ``samples``, its prompt id and prompt the tag, its output the text (the
  elements of a text tensor of several, one per line).
* Images: the legacy ``image`` value (``SummaryWriter.add_image`` / ``add_images``, TF1) and
  the ``images`` plugin's tensor (width, height, then one encoded image each: TF2): a media
  image under the tag (``tag/0``, ``tag/1``, ... when an event holds several), its bytes
  uploaded as they are (PNG or JPEG; another format, a GIF, converted to PNG).
* Histograms: the legacy ``histo`` value (``SummaryWriter.add_histogram``, TF1) holds each
  bucket's right edge and count, the first bucket starting at the data's minimum (an empty
  first bucket, as torch writes, adds no bin); the ``histograms`` plugin's tensor (TF2) holds
  (left, right, count) rows, all of one value when the data is one value repeated (then one
  bin of that value ±0.5, as the SDK makes it; no data: one empty bin [0, 1]). Outer bins
  that count nothing are left out, and an outer edge past the data's extreme (TF1's last
  bucket ends at the largest double) is drawn in to it.
"""

from __future__ import annotations

from typing import Any, Final

from runcast.importers import source_outputs
from runcast.importers.model import Output

TEXT_PLUGIN: Final = "text"
IMAGES_PLUGIN: Final = "images"
HISTOGRAMS_PLUGIN: Final = "histograms"
PLUGINS: Final = (TEXT_PLUGIN, IMAGES_PLUGIN, HISTOGRAMS_PLUGIN)


def outputs_of(value: Any, plugin: str | None, step: int, ts: float, tensors: Any) -> list[Output]:
    """The samples and media of one summary value (``tensors``: ``tensorboard.util.tensor_util``);
    [] for a value of another kind. ValueError when the value does not hold what its kind says."""
    kind = value.WhichOneof("value")
    tag = value.tag
    if kind == "image":
        return [source_outputs.image(step, tag, value.image.encoded_image_string, ts)]
    if kind == "histo":
        edges, counts = _legacy_bins(value.histo)
        return [source_outputs.histogram(step, tag, edges, counts, ts)]
    if kind != "tensor" or plugin not in PLUGINS:
        return []
    array = tensors.make_ndarray(value.tensor)
    if plugin == TEXT_PLUGIN:
        return [source_outputs.sample(step, tag, _text(array), ts)]
    if plugin == IMAGES_PLUGIN:
        encoded = [bytes(x) for x in array.flatten()[2:]]  # [width, height, image, image, ...]
        keys = [tag] if len(encoded) == 1 else [f"{tag}/{i}" for i in range(len(encoded))]
        return [source_outputs.image(step, key, data, ts) for key, data in zip(keys, encoded)]
    edges, counts = _tensor_bins(array)
    return [source_outputs.histogram(step, tag, edges, counts, ts)]


def _text(array: Any) -> str:
    if array.ndim == 0:
        return _decoded(array.item())
    rows = array.reshape(array.shape[0], -1) if array.ndim > 1 else array.reshape(-1, 1)
    return "\n".join("\t".join(_decoded(cell) for cell in row) for row in rows)


def _decoded(cell: Any) -> str:
    return cell.decode("utf-8", "replace") if isinstance(cell, bytes) else str(cell)


def _legacy_bins(histo: Any) -> tuple[list[float], list[float]]:
    limits = [float(x) for x in histo.bucket_limit]
    counts = [float(x) for x in histo.bucket]
    if not counts or len(limits) != len(counts):
        raise ValueError(f"a histogram with {len(limits)} bucket limits and {len(counts)} counts")
    if histo.min < limits[0]:
        left = float(histo.min)
    else:  # the first bucket is empty (torch) or holds only the minimum: as wide as the next
        left = limits[0] - (limits[1] - limits[0] if len(limits) > 1 else 1.0)
    edges, counts = source_outputs.fit_bins([left, *limits], counts)
    if len(edges) > 2 and edges[-2] < histo.max < edges[-1]:
        edges[-1] = float(histo.max)
    if len(edges) > 2 and edges[0] < histo.min < edges[1]:
        edges[0] = float(histo.min)
    return edges, counts


def _tensor_bins(array: Any) -> tuple[list[float], list[float]]:
    rows = [(float(left), float(right), float(count)) for left, right, count in array.reshape(-1, 3)]
    total = sum(count for _, _, count in rows)
    if not rows or total == 0:
        return [0.0, 1.0], [0.0]
    if all(left == right for left, right, _ in rows):  # one value repeated
        value = rows[0][0]
        return [value - 0.5, value + 0.5], [total]
    return [rows[0][0], *(right for _, right, _ in rows)], [count for _, _, count in rows]
