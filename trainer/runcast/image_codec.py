"""PNG and JPEG with the standard library: the type and size an encoded image declares, and a
plain PNG writer for raw 8-bit pixels (used when Pillow is not installed).

This module uses only the standard library (the SDK's core).
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

PNG_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"
_PNG_COLOR: Final = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> PNG colour type (grey, grey+alpha, RGB, RGBA)
# JPEG start-of-frame markers (every SOFn but DHT, JPG and DAC, which share the range)
_SOF: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE: Final = frozenset({0x01, *range(0xD0, 0xD8)})  # markers without a length: TEM, RSTn


def image_header(data: bytes) -> tuple[str, int, int] | None:
    """(content type, width, height) of PNG or JPEG bytes, read from the header; None for anything else."""
    if data.startswith(PNG_SIGNATURE) and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return ("image/png", width, height) if width and height else None
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[str, int, int] | None:
    """Walk the JPEG markers up to the first start of frame (its height and width)."""
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _STANDALONE:
            at += 2
            continue
        (length,) = struct.unpack(">H", data[at + 2:at + 4])
        if marker in _SOF:
            if at + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return ("image/jpeg", width, height) if width and height else None
        if marker == 0xDA or length < 2:  # start of scan before any frame: not an image we can size
            return None
        at += 2 + length
    return None


def encode_png(pixels: bytes, width: int, height: int, channels: int, level: int = 6) -> bytes:
    """A PNG of 8-bit ``pixels`` (rows top to bottom, ``channels`` bytes a pixel: 1, 2, 3 or 4)."""
    stride = width * channels
    if len(pixels) != stride * height:
        raise ValueError(f"{len(pixels)} bytes of pixels for {width}x{height}x{channels}")
    rows = b"".join(b"\x00" + pixels[y * stride:(y + 1) * stride] for y in range(height))  # filter 0: none
    header = struct.pack(">IIBBBBB", width, height, 8, _PNG_COLOR[channels], 0, 0, 0)
    return PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows, level)) + _chunk(b"IEND", b"")


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
