"""Images for the blob tests: real PNG and JPEG files, and hostile bytes posing as images."""

from __future__ import annotations

import hashlib
import io
import struct
import zlib

from PIL import Image

SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'
HTML = b"<!doctype html><html><body><script>alert(document.cookie)</script></body></html>"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def png(width: int = 40, height: int = 20, color: tuple[int, ...] = (200, 30, 30), mode: str = "RGB") -> bytes:
    out = io.BytesIO()
    Image.new(mode, (width, height), color).save(out, format="PNG")
    return out.getvalue()


def jpeg(width: int = 40, height: int = 20) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 90)).save(out, format="JPEG", quality=90)
    return out.getvalue()


def gif() -> bytes:
    out = io.BytesIO()
    Image.new("P", (8, 8)).save(out, format="GIF")
    return out.getvalue()


def png_bomb(side: int = 30000) -> bytes:
    """A valid PNG of ``side``×``side`` one-bit pixels, all zero: ~110 KB that decode to ``side**2`` pixels."""
    row = b"\x00" * (1 + (side + 7) // 8)
    packer = zlib.compressobj(9)
    idat = b"".join(packer.compress(row) for _ in range(side)) + packer.flush()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
