"""The run page's light drawing (frontend/js/chart/sketch.js) and its histogram heat maps
(frontend/js/run/heatmap.js) tick any range without hanging.

A constant metric's smoothed line differs from its raw one by a rounding error (0.1 beside
0.09999999999999999): a y range 1e-17 wide at 0.1, whose tick step vanished beside the values,
so the tick loop never advanced and grew an array until the tab threw "Invalid array length" on
every frame. Such a range now gets no ticks (the chart waits for Plotly); a normal one keeps
Plotly's. The heat map's value axis had the same loop: a histogram of values near 1e17 spread
over a few units (a diverged run's gradients) froze the tab. Run in node on the modules themselves.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKETCH = ROOT / "frontend" / "js" / "chart" / "sketch.js"
HEATMAP = ROOT / "frontend" / "js" / "run" / "heatmap.js"

SCRIPT = """
const m = await import(process.argv[2]);
const ranges = JSON.parse(process.argv[3]);
console.log(JSON.stringify(ranges.map(([lo, hi, axis]) => m.autoTicks([lo, hi], 400, axis).values)));
"""


HEATMAP_SCRIPT = """
const m = await import(process.argv[2]);
const ranges = JSON.parse(process.argv[3]);
console.log(JSON.stringify(ranges.map(([lo, hi, n, whole]) => m.ticks(lo, hi, n, whole))));
"""


def _node(tmp_path: Path, script: str, module: Path, args: object) -> object:
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node (scripts/install)")
    path = tmp_path / "ticks.mjs"
    path.write_text(script)
    res = subprocess.run([node, str(path), module.as_uri(), json.dumps(args)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def ticks(tmp_path: Path, ranges: list[tuple[float, float, str]]) -> list[list[float]]:
    return _node(tmp_path, SCRIPT, SKETCH, ranges)  # type: ignore[return-value]


def test_ranges_it_cannot_tick_get_no_ticks_and_return(tmp_path: Path) -> None:
    narrow = (0.09999999999999999, 0.1, "y")  # a constant's smoothed line beside its raw one
    zero = (5.0, 5.0, "y")
    huge = (1e15, 1e15 + 1e-3, "x")
    assert ticks(tmp_path, [narrow, zero, huge]) == [[], [], []]


def test_a_normal_range_keeps_plotly_s_ticks(tmp_path: Path) -> None:
    assert ticks(tmp_path, [(0.0, 100.0, "y"), (1.0, 1000.0, "x")]) == [[0, 20, 40, 60, 80, 100], [200, 400, 600, 800, 1000]]


def test_the_heat_map_ticks_a_narrow_range_far_from_zero_and_a_normal_one(tmp_path: Path) -> None:
    cases = [(1e17, 1e17 + 10, 5, False), (0.3, 0.7, 5, False), (3, 1203, 6, True), (5.0, 5.0, 5, False)]
    assert _node(tmp_path, HEATMAP_SCRIPT, HEATMAP, cases) == [
        [1e17], [0.3, 0.4, 0.5, 0.6, 0.7], [200, 400, 600, 800, 1000, 1200], [5.0]]
