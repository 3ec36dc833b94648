"""Every CLI error is one line (what, which setting, what to do) and a non-zero exit; the traceback
only with --debug (or RUNCAST_DEBUG=1)."""

from __future__ import annotations

import subprocess

import pytest
from services import BIN, child_env


@pytest.mark.parametrize(("setting", "value", "said"), [
    ("RUNCAST_SESSION_TTL_S", "abc", "RUNCAST_SESSION_TTL_S: Input should be a valid number"),
    ("RUNCAST_CORS_ALLOW_ORIGINS", "not a url", "RUNCAST_CORS_ALLOW_ORIGINS: 'not a url' is not an origin"),
    ("RUNCAST_EMBED_FRAME_ANCESTORS", "'unsafe-inline'", "RUNCAST_EMBED_FRAME_ANCESTORS="),
])
def test_a_bad_setting_stops_serve_with_one_line_naming_it(tmp_path, setting, value, said):
    env = child_env({"RUNCAST_DATA_DIR": str(tmp_path), setting: value})
    res = subprocess.run([str(BIN / "runcast"), "serve", "--port", "9"], env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 2
    [line] = res.stderr.splitlines()
    assert line.startswith(f"runcast serve: {said}") and line.endswith("(run again with --debug for the traceback)")

    debug = subprocess.run([str(BIN / "runcast"), "serve", "--port", "9", "--debug"], env=env, capture_output=True,
                           text=True, timeout=60, check=False)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and setting.lower().removeprefix("runcast_") in debug.stderr
