"""A metric's chart as a figure file (SVG or PNG), drawn with matplotlib from a /metrics answer.

The answer is the one the run page's chart gets for the same range and pixel budget
(rollups: ``metrics/queries.py``), and it is drawn the same way: per segment its own colour,
the part a later segment replaced (``metrics/branch.py``: steps after its start) in grey, and when the
answer is bucketed a min–max band under the bucket means, so a one-step spike shows at any
range. NaN and ±Infinity are gaps, as on the page.

SVG keeps its text as text (editable in a paper's figure tools) and its ids stable, so the
same data gives the same bytes (and ETag). matplotlib's global settings and fonts are not
safe to use from several threads at once: :class:`Plotter` draws one figure at a time.
"""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from runcast_server.core.i18n import SOURCE, Messages, messages
from runcast_server.metrics.branch import abandoned_from
from runcast_server.reads.schemas import MetricSeries, MetricsResponse

if TYPE_CHECKING:
    from matplotlib.axes import Axes

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")  # frontend/js/util.js
GREY = "#9a9a9a"
DPI = 72  # one SVG unit (pt) per requested pixel; a PNG is width * scale pixels wide
POINTS_PER_PIXEL = 2  # what the page asks for (frontend/js/chart.js)
MAX_POINTS = 20_000

Format = Literal["svg", "png"]
MEDIA_TYPES: dict[str, str] = {"svg": "image/svg+xml", "png": "image/png"}
# Fallbacks after DejaVu Sans for the glyphs it lacks (Debian: fonts-noto-cjk, fonts-wqy-microhei).
CJK_FONTS = ("Noto Sans CJK SC", "WenQuanYi Micro Hei")


def budget(width: int) -> int:
    """Buckets per segment for a figure ``width`` pixels wide (as the page's chart asks)."""
    return max(100, min(MAX_POINTS, POINTS_PER_PIXEL * width))


def _number(value: float | str | None) -> float:
    """A wire value as a number to draw: NaN, ±Infinity and empty buckets are gaps."""
    if value is None or isinstance(value, str):
        return math.nan
    return value if math.isfinite(value) else math.nan


@dataclass(frozen=True)
class Figure:
    """What to draw around the data."""

    title: str
    key: str
    width: int
    height: int
    log: bool = False
    start: int | None = None
    end: int | None = None
    language: str = "en"


class PlotterBusy(Exception):
    """Too many figures are waiting to be drawn: the caller should come back later."""


class Plotter:
    """Draws figures one at a time (matplotlib's state is process-wide).

    At most ``queue`` requests wait for their turn, each for at most ``wait_s``; any more
    are refused at once (:class:`PlotterBusy`), so that figures never hold every worker
    thread of the API process.
    """

    def __init__(self, queue: int = 4, wait_s: float = 10.0) -> None:
        import matplotlib

        matplotlib.use("Agg", force=False)
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(queue)
        self._wait_s = wait_s
        self._cjk: bool | None = None  # whether a CJK font is installed (looked up once)

    def _has_glyphs(self, language: str) -> bool:
        """Whether the figure fonts draw ``language``'s labels (a CJK font for Chinese, Japanese, Korean)."""
        if language.split("-")[0] not in ("zh", "ja", "ko"):
            return True
        if self._cjk is None:
            from matplotlib import font_manager

            names = {f.name for f in font_manager.fontManager.ttflist}
            self._cjk = any(name in names for name in CJK_FONTS)
        return self._cjk

    def render(self, answer: MetricsResponse, segment_starts: Sequence[tuple[int, int]], figure: Figure,
               fmt: Format, scale: int = 1) -> bytes:
        """``answer`` drawn as ``fmt``; ``segment_starts`` = (index, start_step) of every segment of the run."""
        if not self._slots.acquire(blocking=False):
            raise PlotterBusy
        try:
            if not self._lock.acquire(timeout=self._wait_s):
                raise PlotterBusy
            try:
                return self._render(answer, segment_starts, figure, fmt, scale)
            finally:
                self._lock.release()
        finally:
            self._slots.release()

    def _render(self, answer: MetricsResponse, segment_starts: Sequence[tuple[int, int]], figure: Figure,
                fmt: Format, scale: int) -> bytes:
        import matplotlib
        from matplotlib.figure import Figure as MplFigure

        # Labels in the figure's language; a PNG whose language needs a font this machine lacks keeps
        # English labels rather than draw empty boxes (an SVG keeps text: the viewer's fonts draw it).
        language = figure.language if fmt == "svg" or self._has_glyphs(figure.language) else SOURCE
        t = messages(language)
        cjk = language != SOURCE and self._has_glyphs(language)  # fallbacks named only when installed
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "runcast",
                                    "font.family": ["DejaVu Sans", *(CJK_FONTS if cjk else ())],
                                    "font.size": 10}):
            fig = MplFigure(figsize=(figure.width / DPI, figure.height / DPI), dpi=DPI, layout="constrained")
            ax = fig.add_subplot()
            ax.patch.set_gid("plot-area")
            multi = len(answer.series) > 1 or len(segment_starts) > 1
            held = {s.segment: set(s.step) for s in answer.series}
            for series in answer.series:
                split = abandoned_from(segment_starts, series.segment, series.step,
                                       lambda index, step: step in held.get(index, ()))
                self._draw(ax, series, split, bucketed=answer.level > 0, multi=multi, t=t)
            ax.set_title(figure.title, loc="left", parse_math=False)
            ax.set_xlabel(t("step"))
            ax.set_ylabel(figure.key, parse_math=False)
            if figure.log:
                ax.set_yscale("log")
            lo = figure.start if figure.start is not None else None
            hi = figure.end if figure.end is not None else None
            if lo is not None or hi is not None:
                ax.set_xlim(left=lo, right=hi)
            ax.grid(True, color="#e5e5e5", linewidth=0.6)
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
            if multi and answer.series:
                ax.legend(loc="best", fontsize=8, frameon=False)
            out = io.BytesIO()
            metadata = {"Date": None} if fmt == "svg" else {"Software": None}
            fig.savefig(out, format=fmt, dpi=DPI * scale, metadata=metadata)
            return out.getvalue()

    @staticmethod
    def _draw(ax: Axes, series: MetricSeries, split: int, *, bucketed: bool, multi: bool, t: Messages) -> None:
        """``series`` drawn: its points before ``split`` in its colour, from there on as the abandoned branch."""
        colour = PALETTE[series.segment % len(PALETTE)] if multi else PALETTE[0]
        label = t("segment {n}", n=series.segment) if multi else None
        parts = [(False, 0, split)]
        if split < len(series.step):
            parts.append((True, max(0, split - 1), len(series.step)))  # shares the fork point
        for abandoned, lo, hi in parts:
            c = GREY if abandoned else colour
            gid = f"seg{series.segment}{'-abandoned' if abandoned else ''}"
            x = series.step[lo:hi]
            line = [_number(v) for v in (series.mean if bucketed else series.last)[lo:hi]]
            if bucketed:  # the band, and its edges drawn so that a one-bucket spike is a visible line
                low = [_number(v) for v in series.min[lo:hi]]
                high = [_number(v) for v in series.max[lo:hi]]
                ax.fill_between(x, low, high, color=c, alpha=0.2, linewidth=0, gid=f"band-{gid}")
                ax.plot(x, high, color=c, linewidth=0.6, alpha=0.7, gid=f"max-{gid}")
                ax.plot(x, low, color=c, linewidth=0.6, alpha=0.7, gid=f"min-{gid}")
            ax.plot(x, line, color=c, linewidth=1.2, linestyle=":" if abandoned else "-", gid=f"line-{gid}",
                    label=None if abandoned else label, marker="o" if len(x) <= 80 else None, markersize=2.5)
