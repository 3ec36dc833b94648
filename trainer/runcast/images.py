"""What ``runcast.Image`` takes, in three stages on two threads.

``source(data)`` (at ``Image(...)``, the caller's thread) checks what was given: PNG or JPEG
bytes, a file path, a numpy array (H×W, H×W×C; uint8, or floats in [0, 1]), a torch tensor
(C×H×W or H×W×C) or a PIL image; a mistake raises ``ValueError``/``TypeError`` naming ``data``.
``Source.snapshot()`` (at ``log``, the training thread) takes a copy the caller may change
afterwards and does no more: a file is read, an array copied, a CPU tensor cloned, a CUDA
tensor copied to pinned memory without waiting for the device. ``Snapshot.encode()`` (the
media worker) makes the bytes: PNG, or the JPEG given; the type and size come from the
encoded header (``image_codec``). Pillow and numpy are used only when the caller's object
needs them (Pillow, when installed, also encodes arrays; without it the PNG writer of
``image_codec`` does).
"""

from __future__ import annotations

import importlib
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from .image_codec import encode_png, image_header
from .wire.limits import MAX_IMAGE_SIDE


class Encoded(NamedTuple):
    """An image ready to upload."""

    data: bytes
    content_type: str
    width: int
    height: int


class ImageError(ValueError):
    """The data cannot be made into an image (the run logs it once and goes on)."""


Snapshot = Callable[[], Encoded]  # called on the media worker


class Source:
    """A checked image source; ``snapshot`` copies it on the training thread."""

    def __init__(self, take: Callable[[], Snapshot]) -> None:
        self.snapshot = take


def source(data: Any) -> Source:
    """The checked source of ``Image(data)``; ValueError or TypeError naming ``data``."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        if image_header(raw) is None:
            raise ValueError("Image: data given as bytes must be a PNG or JPEG file")
        return Source(lambda: lambda: _as_is(raw))
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.is_file():
            raise ValueError(f"Image: data names no file: {str(path)!r}")
        return Source(lambda: _file(path))
    # getattr: the media worker may be importing Pillow right now, leaving PIL.Image half made
    pil_image = getattr(sys.modules.get("PIL.Image"), "Image", None)
    if pil_image is not None and isinstance(data, pil_image):
        return Source(lambda: _pil_copy(data))
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(data, torch.Tensor):
        return _tensor_source(data)
    if type(data).__module__ == "numpy" and hasattr(data, "shape") and hasattr(data, "dtype"):
        layout = _layout(tuple(data.shape), channels_first=False)
        if data.dtype.kind != "f" and str(data.dtype) != "uint8":
            raise ValueError(f"Image: an array must hold uint8 or floats in [0, 1], got {data.dtype}")
        return Source(lambda: _array_snapshot(data.copy(), layout))  # C order, the caller's array untouched
    raise TypeError("Image: data must be PNG/JPEG bytes, a file path, a numpy array, a torch tensor or a PIL "
                    f"image, got {type(data).__name__}")


def _layout(shape: tuple[int, ...], *, channels_first: bool) -> str:
    """``HW``, ``HWC`` or ``CHW`` for an image of ``shape``; ValueError for any other shape."""
    if len(shape) == 2:
        layout = "HW"
    elif len(shape) == 3 and channels_first and shape[0] in (1, 3, 4):
        layout = "CHW"
    elif len(shape) == 3 and shape[2] in (1, 3, 4):
        layout = "HWC"
    else:
        want = "C×H×W or H×W×C" if channels_first else "H×W or H×W×C"
        raise ValueError(f"Image: data must be {want} with C in 1, 3 or 4, got shape {shape}")
    height, width = shape[-2:] if layout == "CHW" else shape[:2]
    if not (1 <= width <= MAX_IMAGE_SIDE and 1 <= height <= MAX_IMAGE_SIDE):
        raise ValueError(f"Image: width and height must be 1-{MAX_IMAGE_SIDE} pixels, got shape {shape}")
    return layout


def _as_is(raw: bytes) -> Encoded:
    found = image_header(raw)
    if found is None:
        raise ImageError("not a PNG or JPEG file")
    return Encoded(raw, *found)


def encoded(raw: bytes) -> Encoded:
    """The bytes of an image file ready to upload: PNG or JPEG as they are, another format Pillow
    opens converted to PNG (ImageError when neither)."""
    if image_header(raw) is not None:
        return _as_is(raw)
    try:
        return _png_of(_pil_module().open(io.BytesIO(raw)))
    except (OSError, ValueError) as exc:  # Pillow's UnidentifiedImageError is an OSError
        raise ImageError(f"not an image Pillow can read ({exc})") from None


def _file(path: Path) -> Snapshot:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"cannot read {path}: {exc.strerror}") from None
    return lambda: encoded(raw)  # another format than PNG or JPEG: Pillow converts it


def _pil_copy(image: Any) -> Snapshot:
    copy = image.copy()
    return lambda: _png_of(copy)


def _tensor_source(tensor: Any) -> Source:
    layout = _layout(tuple(tensor.shape), channels_first=True)
    if tensor.is_complex() or not (tensor.is_floating_point() or str(tensor.dtype) == "torch.uint8"):
        raise ValueError(f"Image: a tensor must hold uint8 or floats in [0, 1], got {tensor.dtype}")

    def take() -> Snapshot:
        ready, copy = _tensor_copy(tensor)
        return lambda: _encode_array(_tensor_array(ready, copy, layout), "HW" if layout == "HW" else "HWC")

    return Source(take)


def _tensor_copy(tensor: Any) -> tuple[Any, Any]:
    """(an event to wait for or None, a CPU copy of ``tensor``), without waiting for a CUDA device."""
    tensor = tensor.detach()
    if tensor.is_cuda:
        torch = sys.modules["torch"]
        pinned = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
        pinned.copy_(tensor, non_blocking=True)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(tensor.device))  # the stream the copy was queued on
        return event, pinned
    return None, tensor.clone() if tensor.device.type == "cpu" else tensor.cpu()


def _tensor_array(ready: Any, tensor: Any, layout: str) -> Any:
    """The copied tensor as a uint8-or-float numpy array, height first (on the media worker)."""
    if ready is not None:
        ready.synchronize()
    if layout == "CHW":
        tensor = tensor.permute(1, 2, 0)
    if tensor.is_floating_point():
        tensor = tensor.float()  # half and bfloat16 have no numpy type
    try:
        return tensor.contiguous().numpy()
    except RuntimeError as exc:  # torch without numpy
        raise ImageError(f"cannot read the tensor ({exc})") from None


def _array_snapshot(array: Any, layout: str) -> Snapshot:
    return lambda: _encode_array(array, layout)


def _encode_array(array: Any, layout: str) -> Encoded:
    """PNG of a copied array (H×W or H×W×C): floats clipped to [0, 1] (NaN as 0) and scaled to 0-255."""
    if array.dtype.kind == "f":
        array = array.astype("float32")
        array[array != array] = 0.0
        array = (array.clip(0.0, 1.0) * 255.0 + 0.5).astype("uint8")
    height, width = array.shape[:2]
    channels = 1 if layout == "HW" else array.shape[2]
    pil = _pil_module(required=False)
    if pil is None:
        return _as_is(encode_png(array.tobytes(), width, height, channels))
    return _png_of(pil.fromarray(array.reshape(height, width) if channels == 1 else array))  # L, RGB or RGBA


def _png_of(image: Any) -> Encoded:
    """A PIL image as PNG (modes PNG cannot hold become RGB or RGBA)."""
    if image.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"):
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return _as_is(out.getvalue())


def _pil_module(required: bool = True) -> Any:
    """``PIL.Image``, imported on the media worker when an image needs it; None (or ImageError) without Pillow."""
    try:
        return importlib.import_module("PIL.Image")
    except ImportError:
        if required:
            raise ImageError("Pillow is needed to convert this image to PNG (pip install pillow)") from None
        return None
