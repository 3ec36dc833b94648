"""The W&B-style module API keeps its state in one object: ``runcast.run`` is only the current
run (no module of that name shadows it), read from the one ``ModuleRun`` the package holds,
and ``runcast.config`` / ``summary`` act on that run."""

from __future__ import annotations

from pathlib import Path

import pytest
import runcast
from runcast import Run
from runcast.current import ModuleRun


def test_runcast_run_is_only_the_current_run(tmp_path, monkeypatch):
    monkeypatch.delenv("RUNCAST_SERVER", raising=False)
    package = Path(runcast.__file__).parent
    assert not (package / "run.py").exists() and not (package / "run").exists()  # Run's module: runcast.run_handle
    runcast.finish()  # a run an earlier test made with runcast.init, if any
    assert runcast.run is None
    run = runcast.init("p", "module-state", mode="offline", dir=str(tmp_path), capture_code=False, system_metrics=False)
    try:
        from runcast import run as imported

        assert runcast.run is run and imported is run
        runcast.config["lr"] = 0.1
        assert run.config["lr"] == 0.1
        # the run is held in one place: no other module attribute refers to it
        assert isinstance(runcast._module, ModuleRun) and runcast._module.run is run
        assert [name for name, value in vars(runcast).items() if isinstance(value, Run)] == []
    finally:
        runcast.finish()
    assert runcast.run is None
    with pytest.raises(RuntimeError, match=r"runcast\.log\(\) needs a run"):
        runcast.log({"a": 1.0})
    with pytest.raises(RuntimeError, match=r"runcast\.config needs a run"):
        runcast.config["lr"] = 0.2


def test_two_module_states_do_not_share_a_run():
    one, two = ModuleRun(), ModuleRun()
    one.run = object()  # type: ignore[assignment]
    assert two.run is None
    with pytest.raises(RuntimeError):
        two.config["x"] = 1
