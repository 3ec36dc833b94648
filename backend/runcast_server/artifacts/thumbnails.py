"""Thumbnails of stored images: resized once, kept in the storage beside the image.

A thumbnail ``width`` pixels wide keeps the image's aspect ratio (its height rounded, at least
one pixel) and is never larger than the image (a width at or above the image's own is the
image itself). WebP when this Pillow writes it, else PNG; kept under
``<project>/blobs/thumbs/<sha256>-<width>.<ext>``, so each is computed once per project.
"""

from __future__ import annotations

import io
from typing import Final

from PIL import Image, features

from runcast_server.artifacts.blob_store import BlobStore, thumb_key

WEBP: Final = features.check("webp")
THUMB_TYPE: Final = "image/webp" if WEBP else "image/png"
_EXT: Final = "webp" if WEBP else "png"


def thumbnail(store: BlobStore, project: str, sha256: str, original: bytes, width: int) -> bytes:
    """The thumbnail ``width`` pixels wide of the image ``original`` (stored bytes), made and kept if need be."""
    key = thumb_key(project, sha256, width, _EXT)
    kept = store.get(key)
    if kept is not None:
        return kept
    made = resize(original, width)
    store.put(key, made, THUMB_TYPE)
    return made


def resize(original: bytes, width: int) -> bytes:
    """``original`` scaled to ``width`` pixels wide (a JPEG is decoded at a reduced scale when it can be)."""
    with Image.open(io.BytesIO(original), formats=["PNG", "JPEG"]) as image:
        height = max(1, round(image.height * width / image.width))
        image.draft("RGB", (width, height))  # JPEG: decode at 1/2, 1/4 or 1/8 scale when enough
        mode = "RGBA" if "A" in image.getbands() or "transparency" in image.info else "RGB"
        small = image.convert(mode).resize((width, height), Image.Resampling.LANCZOS, reducing_gap=3.0)
    out = io.BytesIO()
    if WEBP:
        small.save(out, format="WEBP", quality=85, method=4)
    else:
        small.save(out, format="PNG", optimize=False)
    return out.getvalue()
