"""The runs the query client's tests read, made by the real SDK in child processes: a public run
of project ``alpha`` resumed once (NaN and infinities logged, a checkpoint, a summary), a private
run of ``alpha``, and a token of project ``beta``."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services import child_env

TRAINER = """
import pathlib, sys, runcast
storage, step0, last = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
resume = sys.argv[4] if len(sys.argv) > 4 else None
kw = {"resume": resume, "resume_step": step0} if resume else {
    "id": "queryrun-0001", "name": "baseline", "config": {"lr": 3e-4, "layers": 2}, "tags": ["base", "sweep"],
    "group": "g1", "notes": "first try"}
run = runcast.init(project="alpha", checkpoint_dir=storage, system_metrics=False, capture_code=False, **kw)
for step in range(step0 + (1 if resume else 0), last + 1):
    special = {3: float("nan"), 5: float("inf"), 7: float("-inf")}
    run.log({"loss": special.get(step, 1 / (step + 1)) if not resume else 2.0 + step}, step=step)
    if step % 10 == 0:
        run.log({"acc": step / 100}, step=step)
    if step == 30 and not resume:
        (storage / "alpha").mkdir(parents=True, exist_ok=True)
        (storage / "alpha" / "30.pt").write_bytes(b"weights-30" * 100)
        run.checkpoint(str(storage / "alpha" / "30.pt"), step=30, metrics={"val/loss": 0.5})
run.summary["best"] = 0.25
run.finish()
"""

PRIVATE = """
import runcast
run = runcast.init(project="alpha", id="secretrun-01", name="secret", visibility="private", system_metrics=False,
                   capture_code=False)
run.log({"loss": 1.0}, step=0)
run.finish()
"""

RUN = "queryrun-0001"
PRIVATE_RUN = "secretrun-01"


@dataclass
class World:
    server: str
    token: str  # of project alpha
    other: str  # of project beta


def _py(code: str, env: dict[str, str], *args: str) -> None:
    res = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr


def make(server: str, token: str, other: str, storage: Path, home: Path) -> World:
    """Log the runs through ``server`` (its storage at ``storage``)."""
    env = child_env({"RUNCAST_SERVER": server, "RUNCAST_TOKEN": token, "HOME": str(home),
                     "RUNCAST_SPOOL_DIR": str(home / "spool")})
    _py(TRAINER, env, str(storage), "0", "59")
    _py(TRAINER, env, str(storage), "30", "80", RUN)
    _py(PRIVATE, env)
    return World(server, token, other)


def expected_rows() -> list[dict[str, Any]]:
    """What the trainer logged, as ``history(pandas=False)`` rows."""
    rows = []
    for segment, (first, last) in enumerate(((0, 59), (31, 80))):
        for step in range(first, last + 1):
            loss = {3: math.nan, 5: math.inf, 7: -math.inf}.get(step, 1 / (step + 1)) if segment == 0 else 2.0 + step
            row: dict[str, Any] = {"_segment": segment, "_step": step, "loss": loss}
            if step % 10 == 0:
                row["acc"] = step / 100
            rows.append(row)
    return rows


def untimed(rows: Any) -> list[dict[str, Any]]:
    """History rows without the step time columns (``_timestamp``, ``_runtime``)."""
    return [{k: v for k, v in r.items() if k not in ("_timestamp", "_runtime")} for r in rows]


def same_rows(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> bool:
    """Equal, NaN equal to NaN."""
    def norm(row: dict[str, Any]) -> dict[str, Any]:
        return {k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
    return [norm(r) for r in got] == [norm(r) for r in want]
