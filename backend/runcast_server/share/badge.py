"""A run's badge: a two-part SVG (label | status · step · last value), sized to its text.

Text is measured with the metrics of DejaVu Sans (the font matplotlib ships) at 11 px; the
SVG names that font first and pins each text's length (``textLength``), so the badge looks
the same where another font is used. Every piece of text is XML-escaped, in content and in
attributes: a run name or key is data, never markup.
"""

from __future__ import annotations

import hashlib
import math
import threading
import unicodedata
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from runcast_server.core.i18n import Messages, messages

FONT_PX = 11
PAD_PX = 6
HEIGHT_PX = 20
MAX_TEXT = 60  # characters of the label; longer text is cut with an ellipsis
MAX_KEY = 40  # characters of the key in the message (its value is never cut)

COLORS = {
    "running": "#2e7d32",
    "finished": "#1565c0",
    "failed": "#c62828",
    "killed": "#616161",
    "stalled": "#ef6c00",
}
LABEL_COLOR = "#555"


class TextMeter:
    """Advance widths of DejaVu Sans at ``FONT_PX``, per character (kept once measured).

    A character the font lacks counts as an em when East Asian wide, else as 0.6 em.
    """

    def __init__(self) -> None:
        from matplotlib import font_manager, ft2font

        path = font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans"), fallback_to_default=True)
        self._font = ft2font.FT2Font(path)
        self._font.set_size(FONT_PX, 72)
        self._flags = ft2font.LoadFlags.NO_HINTING
        self._widths: dict[str, float] = {}
        self._lock = threading.Lock()  # the font object is not safe to share between threads

    def char(self, c: str) -> float:
        width = self._widths.get(c)
        if width is not None:
            return width
        with self._lock:
            cp = ord(c)
            if unicodedata.combining(c):
                width = 0.0
            elif self._font.get_char_index(cp):
                width = self._font.load_char(cp, flags=self._flags).linearHoriAdvance / 65536
            else:
                width = FONT_PX * (1.0 if unicodedata.east_asian_width(c) in "WF" else 0.6)
            if len(self._widths) < 4096:
                self._widths[c] = width
            return width

    def width(self, text: str) -> float:
        return sum(self.char(c) for c in text)


def printable(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold (controls, U+FFFE, U+FFFF)."""
    return "".join(c for c in text if unicodedata.category(c) not in ("Cc", "Cs") and c not in "\ufffe\uffff")


def shorten(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` on one printable line, at most ``limit`` characters (an ellipsis marks a cut)."""
    flat = " ".join(printable(text.replace("\t", " ").replace("\n", " ")).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def format_value(value: float | str | None) -> str:
    """A metric value in 4 significant digits; NaN and ±Infinity by name."""
    if value is None:
        return "–"
    if isinstance(value, str):
        return {"NaN": "NaN", "Infinity": "+inf", "-Infinity": "-inf"}.get(value, value)
    if math.isfinite(value) and value == int(value) and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.4g}"


@dataclass(frozen=True)
class Badge:
    label: str
    message: str
    color: str

    def svg(self, meter: TextMeter) -> bytes:
        """The badge as a standalone SVG document."""
        label, message = shorten(self.label), shorten(self.message, 2 * MAX_TEXT)
        lw, mw = meter.width(label), meter.width(message)
        left = math.ceil(lw) + 2 * PAD_PX
        right = math.ceil(mw) + 2 * PAD_PX
        total = left + right
        title = escape(f"{label}: {message}")
        y = 14
        # An id of its own: badges inlined in one page must not clip each other.
        clip = "c" + hashlib.sha256(f"{label}\0{message}\0{self.color}".encode()).hexdigest()[:10]
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="{HEIGHT_PX}" '
            f'role="img" aria-label={quoteattr(f"{label}: {message}")}>'
            f"<title>{title}</title>"
            f'<clipPath id="{clip}"><rect width="{total}" height="{HEIGHT_PX}" rx="3"/></clipPath>'
            f'<g clip-path="url(#{clip})">'
            f'<rect width="{left}" height="{HEIGHT_PX}" fill="{LABEL_COLOR}"/>'
            f'<rect x="{left}" width="{right}" height="{HEIGHT_PX}" fill={quoteattr(self.color)}/>'
            f"</g>"
            f'<g fill="#fff" font-family="DejaVu Sans,Verdana,Geneva,sans-serif" font-size="{FONT_PX}">'
            f'<text x="{PAD_PX}" y="{y}" textLength="{lw:.1f}" lengthAdjust="spacingAndGlyphs">{escape(label)}</text>'
            f'<text x="{left + PAD_PX}" y="{y}" textLength="{mw:.1f}" lengthAdjust="spacingAndGlyphs">'
            f"{escape(message)}</text>"
            f"</g></svg>"
        ).encode()


def run_badge(*, name: str, status: str, last_step: int | None, key: str | None,
              last: tuple[int, float | str | None] | None, label: str | None, t: Messages | None = None) -> Badge:
    """The badge of a run: its name (or ``label``) | status · step N · key value, in ``t``'s language."""
    t = t or messages()
    parts = [t(status, context="status")]
    if last_step is not None:
        parts.append(t("step {step}", step=f"{last_step:,}"))
    if key is not None:
        parts.append(f"{shorten(key, MAX_KEY)} {format_value(last[1]) if last is not None else '–'}")
    return Badge(label=label if label is not None else name, message=" · ".join(parts),
                 color=COLORS.get(status, LABEL_COLOR))
