"""What an uploaded image must be before it is stored: PNG or JPEG, as declared, within the pixel limit.

``check_image`` reads the size from the header first (``runcast.image_codec``, no decoder) and
refuses what is too large before Pillow sees it; Pillow then opens the bytes with only its PNG and
JPEG decoders, ``verify()``s them (PNG: every chunk's CRC) and decodes them once (``load()``), so
a truncated or corrupt image is refused too. The content type the server records is the one it
found, never the client's word. Pillow's own decompression-bomb guard stays on
(``max_image_pixels`` is at most its limit).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Final

from PIL import Image, UnidentifiedImageError
from runcast.image_codec import image_header

IMAGE_TYPES: Final = {"image/png": "PNG", "image/jpeg": "JPEG"}


class ImageRejected(Exception):
    """The bytes are not an image the server stores: ``status`` (415 or 422) and the ``field`` at fault."""

    def __init__(self, status: int, message: str, field: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


@dataclass(frozen=True)
class ImageInfo:
    content_type: str
    width: int
    height: int


def declared_type(header: str | None) -> str:
    """The declared ``Content-Type`` (parameters dropped); ImageRejected 415 unless PNG or JPEG."""
    value = (header or "").split(";", 1)[0].strip().lower()
    if value not in IMAGE_TYPES:
        raise ImageRejected(415, f"Content-Type must be {' or '.join(IMAGE_TYPES)}, got {value or 'none'!r}",
                            "Content-Type")
    return value


def check_image(data: bytes, declared: str, max_pixels: int) -> ImageInfo:
    """The type and size of ``data`` after every check; ImageRejected naming the field at fault."""
    found = image_header(data)
    if found is None:
        raise ImageRejected(415, "the body is not a PNG or JPEG image", "Content-Type")
    content_type, width, height = found
    if content_type != declared:
        raise ImageRejected(422, f"the body is {content_type}, not the declared {declared}", "Content-Type")
    if width * height > max_pixels:
        raise ImageRejected(422, f"the image has {width}x{height} = {width * height} pixels, more than "
                            f"{max_pixels} (RUNCAST_MAX_IMAGE_PIXELS)", "body")
    try:
        with Image.open(io.BytesIO(data), formats=[IMAGE_TYPES[declared]]) as image:
            if image.size != (width, height):
                raise ImageRejected(422, "the image's header and its frame disagree on its size", "body")
            image.verify()
        with Image.open(io.BytesIO(data), formats=[IMAGE_TYPES[declared]]) as image:
            image.load()
    except UnidentifiedImageError:
        raise ImageRejected(415, "the body is not a PNG or JPEG image Pillow can read", "Content-Type") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise ImageRejected(422, f"the image does not decode ({type(exc).__name__}: {exc})", "body") from None
    return ImageInfo(content_type, width, height)
