"""The run page's smoothed line (frontend/js/chart/smoothing.js) of a constant is that constant.

The debiased EMA of 0.4, 0.4, ... rounds to 0.39999999999999997 and the like, and Plotly drew
a flat learning rate as noise on ticks 1e-17 apart. The average weighs the values so far, so it is
kept within their range. Run in node on the module itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMOOTHING = ROOT / "frontend" / "js" / "chart" / "smoothing.js"

SCRIPT = """
const m = await import(process.argv[2]);
const [series, weight] = JSON.parse(process.argv[3]);
console.log(JSON.stringify(m.ema(series, weight).y));
"""


def smoothed(tmp_path: Path, series: list[float | None], weight: float) -> list[float | None]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node (scripts/install)")
    script = tmp_path / "ema.mjs"
    script.write_text(SCRIPT)
    res = subprocess.run([node, str(script), SMOOTHING.as_uri(), json.dumps([series, weight])],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.parametrize("value", [0.4, 3e-4, 0.1, -7.3, 1e300])
@pytest.mark.parametrize("weight", [0.6, 0.9, 0.99])
def test_a_constant_smooths_to_itself(tmp_path: Path, value: float, weight: float) -> None:
    assert smoothed(tmp_path, [value] * 500, weight) == [value] * 500


def test_a_varying_series_is_the_debiased_ema_and_a_gap_stays_a_gap(tmp_path: Path) -> None:
    values = [3.0, 2.0, None, 2.5, 1.0]
    last, n, want = 0.0, 0, []
    for v in values:
        if v is None:
            want.append(None)
            continue
        last, n = last * 0.6 + 0.4 * v, n + 1
        want.append(last / (1 - 0.6 ** n))
    got = smoothed(tmp_path, values, 0.6)
    assert [g is None for g in got] == [w is None for w in want]
    assert [g for g in got if g is not None] == pytest.approx([w for w in want if w is not None], rel=1e-15)
