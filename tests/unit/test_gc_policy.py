"""``runcast serve``'s processes run with the serving garbage-collector policy (core/gc_policy.py);
other users of the app (tests, ``runcast demo``) keep CPython's defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from services import child_env

PROBE = """
import gc, json
from runcast_server.app import create_app, served_app
defaults = gc.get_threshold()
create_app()
plain = gc.get_threshold()
served_app()
print(json.dumps({"defaults": defaults, "plain": plain, "served": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def test_served_app_freezes_the_heap_and_spaces_young_collections(tmp_path: Path) -> None:
    from runcast_server.core.gc_policy import YOUNG_THRESHOLD

    out = subprocess.run([sys.executable, "-c", PROBE], env=child_env({"RUNCAST_DATA_DIR": str(tmp_path)}),
                         capture_output=True, text=True, check=True, timeout=120)  # fmt: skip
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["plain"] == seen["defaults"]  # building an app changes nothing process-wide
    assert seen["served"] == [YOUNG_THRESHOLD, *seen["defaults"][1:]]
    assert seen["frozen"] > 10_000  # the modules and the app: out of every collection from now on

