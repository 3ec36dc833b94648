"""The bins of ``runcast.Histogram``: computed on the trainer, never shipping the values.

``bins`` equal-width bins between the finite minimum and maximum (one value repeated: the
bins span it ±0.5; no finite value: one empty bin [0, 1]), with the NaN, +Inf and -Inf
values counted apart. ``snapshot(values, bins)`` runs on the training thread and does as
little as it can: a numpy array or CPU tensor is copied (binned later on the media worker);
a CUDA tensor is binned on its device by a few asynchronous kernels whose small result is
copied to pinned memory, so the training thread never waits for the device. ``Bins`` come
out of the returned function, on the media worker.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .wire.limits import MAX_HISTOGRAM_BINS


class Bins(NamedTuple):
    """A histogram's ``edges`` (one more than ``counts``) and the non-finite counts."""

    edges: list[float]
    counts: list[float]
    nan: int
    inf: int
    neg_inf: int


Pending = Callable[[], Bins]  # called on the media worker


def check(values: Any, bins: Any) -> None:
    """ValueError/TypeError naming ``values`` or ``bins`` for what ``Histogram`` cannot take."""
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_HISTOGRAM_BINS:
        raise ValueError(f"Histogram: bins must be an integer in [1, {MAX_HISTOGRAM_BINS}], got {bins!r}")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(values, torch.Tensor):
        if values.is_complex():
            raise ValueError(f"Histogram: values must be real numbers, got a tensor of {values.dtype}")
        return
    if type(values).__module__ == "numpy" and hasattr(values, "dtype"):
        if values.dtype.kind not in "biuf":
            raise ValueError(f"Histogram: values must be real numbers, got an array of {values.dtype}")
        return
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"Histogram: values must be a tensor, a numpy array or a list of numbers, "
                        f"got {type(values).__name__}")
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"Histogram: values[{i}] is not a number: {value!r}")


def snapshot(values: Any, bins: int) -> Pending:
    """Take ``values`` (checked by ``check``) on the training thread; bin them when called."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(values, torch.Tensor):
        tensor = values.detach()
        if tensor.is_cuda:
            summary = torch.empty(5 + bins, dtype=torch.float64, pin_memory=True)
            summary.copy_(_device_bins(tensor, bins), non_blocking=True)
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(tensor.device))  # the stream the kernels were queued on
            return lambda: _from_summary(summary, bins, event)
        copy = tensor.clone() if tensor.device.type == "cpu" else tensor.cpu()
        return lambda: _from_summary(_device_bins(copy, bins), bins, None)
    if type(values).__module__ == "numpy":
        array = values.copy()
        return lambda: _numpy_bins(array, bins)
    numbers_ = [float(v) for v in values]
    return lambda: _python_bins(numbers_, bins)


def _device_bins(x: Any, bins: int) -> Any:
    """[lo, hi, nan, inf, neg_inf, counts...] as one float64 tensor on ``x``'s device; no host sync."""
    torch = sys.modules["torch"]
    x = x.flatten()
    if not x.is_floating_point():
        x = x.double()
    elif x.element_size() < 4:
        x = x.float()
    if x.numel() == 0:
        head = torch.tensor([math.inf, -math.inf, 0, 0, 0], dtype=torch.float64, device=x.device)
        return torch.cat([head, x.new_zeros(bins, dtype=torch.float64)])
    finite = x.isfinite()
    lo = x.masked_fill(~finite, math.inf).min()
    hi = x.masked_fill(~finite, -math.inf).max()
    flat = ~(hi > lo)  # one value repeated, or none finite
    lo, hi = lo - flat * 0.5, hi + flat * 0.5
    scaled = ((x - lo) / (hi - lo)).masked_fill(~finite, -1.0)  # histc leaves out what is outside [0, 1]
    counts = scaled.histc(bins=bins, min=0.0, max=1.0)
    stats = [lo, hi, x.isnan().sum(), (x == math.inf).sum(), (x == -math.inf).sum()]
    return torch.cat([s.reshape(1).double() for s in stats] + [counts.double()])


def _from_summary(summary: Any, bins: int, ready: Any) -> Bins:
    if ready is not None:
        ready.synchronize()
    lo, hi, nan, inf, neg_inf, *counts = summary.tolist()
    return _bins(lo, hi, counts, int(nan), int(inf), int(neg_inf), bins)


def _numpy_bins(array: Any, bins: int) -> Bins:
    np = sys.modules["numpy"]  # the caller passed a numpy array: numpy is loaded
    x = array.ravel().astype("float64")
    finite = x[np.isfinite(x)]
    nan, inf, neg_inf = int(np.isnan(x).sum()), int((x == math.inf).sum()), int((x == -math.inf).sum())
    if finite.size == 0:
        return _bins(math.inf, -math.inf, [], nan, inf, neg_inf, bins)
    lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    counts, _ = np.histogram(finite, bins=bins, range=(lo, hi))
    return _bins(lo, hi, counts.tolist(), nan, inf, neg_inf, bins)


def _python_bins(values: list[float], bins: int) -> Bins:
    finite = [v for v in values if math.isfinite(v)]
    nan = sum(1 for v in values if math.isnan(v))
    inf = sum(1 for v in values if v == math.inf)
    if not finite:
        return _bins(math.inf, -math.inf, [], nan, inf, len(values) - len(finite) - nan - inf, bins)
    lo, hi = min(finite), max(finite)
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    counts = [0.0] * bins
    for v in finite:
        counts[min(bins - 1, int((v - lo) / (hi - lo) * bins))] += 1
    return _bins(lo, hi, counts, nan, inf, len(values) - len(finite) - nan - inf, bins)


def _bins(lo: float, hi: float, counts: list[float], nan: int, inf: int, neg_inf: int, bins: int) -> Bins:
    if not math.isfinite(lo) or not math.isfinite(hi):  # no finite value: one empty bin
        return Bins([0.0, 1.0], [0.0], nan, inf, neg_inf)
    edges = [lo + (hi - lo) * i / bins for i in range(bins)] + [hi]
    return Bins(edges, [float(c) for c in counts], nan, inf, neg_inf)
