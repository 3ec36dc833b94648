"""``runcast.Api`` against a real embedded ``runcast serve`` (SQLite): reads, history, walls, updates."""

from __future__ import annotations

import pytest
from integration.test_embedded import make_token

from query import world
from query.checks import check_all


def test_the_query_client_on_runcast_serve(processes, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "data"
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir)}
    processes.start_api()
    token = make_token(processes.env, "alpha", data_dir)
    other = make_token(processes.env, "beta", data_dir)
    made = world.make(processes.api_url, token, other, data_dir / "storage", tmp_path)
    check_all(made, tmp_path, monkeypatch)


SDK_ONLY = """
import runcast
run = runcast.Api(sys.argv[2], sys.argv[3]).run(sys.argv[4])
rows = run.history()
assert isinstance(rows, list) and repr(rows) == repr(list(run.scan_history())), rows[:3]  # NaN: by repr
print(len(rows), sum(len(r) - 4 for r in rows))  # less _segment, _step, _timestamp, _runtime
print("loaded:", sorted({m.partition(".")[0] for m in sys.modules} & BLOCKED))
"""


def test_the_query_client_needs_neither_pandas_nor_pyarrow(processes, tmp_path) -> None:
    """An SDK-only install (no pandas, pyarrow, numpy, server or CLI packages): rows from the JSONL export."""
    from unit.test_sdk_only import SERVER_AND_CLI, run_python

    data_dir = tmp_path / "data"
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir)}
    processes.start_api()
    token = make_token(processes.env, "alpha", data_dir)
    made = world.make(processes.api_url, token, make_token(processes.env, "beta", data_dir), data_dir / "storage",
                      tmp_path)
    res = run_python(SDK_ONLY, f"{SERVER_AND_CLI},pandas,pyarrow", made.server, made.token, world.RUN)
    assert res.returncode == 0, res.stderr
    want = world.expected_rows()
    assert res.stdout.split("\n")[:2] == [f"{len(want)} {sum(len(r) - 2 for r in want)}", "loaded: []"]
