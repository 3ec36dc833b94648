"""A client generated from the live ``/openapi.json`` works (docs/api.md, "Generating a client").

The config file and the command of docs/api.md, word for word, run openapi-python-client (from
``.venv-tools``, which ``scripts/install --dev`` makes) against a real embedded ``runcast serve``:
it prints no warning; every module of the package compiles with warnings as errors (no
SyntaxWarning) and imports, but the one the doc says the generator cannot write; then the
generated functions ingest a batch with a token, list the runs, read the run and its metrics,
and the doc's Python example runs against the same server.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from services import ROOT, create_token

pytestmark = pytest.mark.slow

GENERATOR = ROOT / ".venv-tools" / "bin" / "openapi-python-client"
SECTION = re.compile(r"^## Generating a client\n(.*?)(?=^## |\Z)", re.S | re.M)
# Two binary body types (PNG or JPEG) for one operation: the generator's module does not import.
UNUSABLE = {"runcast_client.api.artifacts.put_blob"}


def _block(section: str, lang: str) -> str:
    return re.search(rf"^```{lang}\n(.*?)^```", section, re.S | re.M)[1]


def _docs() -> tuple[str, str, str]:
    """The config file, the command and the Python example of the doc's section."""
    section = SECTION.search((ROOT / "docs" / "api.md").read_text())[1]
    return _block(section, "yaml"), _block(section, "sh"), _block(section, "python")


@pytest.fixture
def generated(processes: Any, tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """(server URL, a token of project ``gen``, the generated project's directory) with its package importable."""
    if not GENERATOR.exists():
        pytest.fail(f"{GENERATOR} is missing: scripts/install --dev installs openapi-python-client there")
    processes.env = {"RUNCAST_DATA_DIR": str(tmp_path / "data")}
    processes.start_api()
    url = processes.api_url
    token = create_token(processes.env, "gen")
    config, command, _ = _docs()
    work = tmp_path / "client"
    work.mkdir()
    (work / "runcast-client.yaml").write_text(config)
    env = {**os.environ, "RC": url, "PATH": f"{GENERATOR.parent}{os.pathsep}{os.environ['PATH']}"}
    res = subprocess.run(["bash", "-c", f"set -eo pipefail\n{command}"], cwd=work, env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    project = work / "runcast-client"
    assert (res.stdout + res.stderr).strip() == f"Generating {project}", res.stdout + res.stderr  # no warning
    sys.path.insert(0, str(project))
    try:
        yield url, token, project
    finally:
        sys.path.remove(str(project))
        for name in [n for n in sys.modules if n == "runcast_client" or n.startswith("runcast_client.")]:
            del sys.modules[name]


def _import_all() -> dict[str, ModuleType | Exception]:
    """Every module of the package, imported with warnings as errors (or what its import raised)."""
    found: dict[str, ModuleType | Exception] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        package = importlib.import_module("runcast_client")
        for info in pkgutil.walk_packages(package.__path__, "runcast_client."):
            try:
                found[info.name] = importlib.import_module(info.name)
            except Exception as exc:  # noqa: BLE001  (a generated module that does not import is the finding)
                found[info.name] = exc
    return found


def test_a_generated_client_reads_and_writes_a_real_server(generated: tuple[str, str, Path]) -> None:
    url, token, project = generated
    sources = sorted((project / "runcast_client").rglob("*.py"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a SyntaxWarning (an invalid escape in a docstring) is an error
        for path in sources:
            compile(path.read_text(), str(path), "exec")
    modules = _import_all()
    assert {name for name, m in modules.items() if isinstance(m, Exception)} == UNUSABLE
    assert len(modules) > 100  # every operation has its module, every schema its model

    from runcast_client import AuthenticatedClient, Client
    from runcast_client.api.export import export_run
    from runcast_client.api.ingest import ingest
    from runcast_client.api.metrics import get_metrics
    from runcast_client.api.runs import get_run, list_runs
    from runcast_client.models import ErrorBody, ExportRunFormat, IngestBatch, MetricsEvent, RunStartedEvent

    envelope = {"run": "genclient01", "segment": "genseg0001", "ts": time.time()}
    events = [RunStartedEvent.from_dict({**envelope, "seq": 0, "type": "run_started", "project": "gen",
                                         "name": "generated", "config": {"lr": 0.001, "layers": [2, 4]}})]
    events += [MetricsEvent.from_dict({**envelope, "seq": step, "type": "metrics", "step": step,
                                       "values": {"train/loss": 1 / step, "lr": "NaN"}}) for step in range(1, 6)]
    batch = IngestBatch(events=events)

    writer = AuthenticatedClient(base_url=url, token=token)
    anonymous = Client(base_url=url)
    refused = ingest.sync_detailed(client=anonymous, body=batch)  # a write needs the token
    assert refused.status_code == 401 and isinstance(refused.parsed, ErrorBody)
    accepted = ingest.sync(client=writer, body=batch)
    assert accepted is not None and accepted.accepted == 6

    runs = list_runs.sync(client=anonymous)
    assert [(r.id, r.project, r.name, r.last_step) for r in runs.runs] == [("genclient01", "gen", "generated", 5)]
    run = get_run.sync("genclient01", client=anonymous)
    assert (run.name, run.status.value, run.keys) == ("generated", "running", ["lr", "train/loss"])
    assert run.config.to_dict() == {"lr": 0.001, "layers": [2, 4]}
    loss = get_metrics.sync("genclient01", client=writer, key="train/loss", max_points=100)
    [series] = loss.series
    assert (series.step, series.last) == ([1, 2, 3, 4, 5], [1.0, 0.5, 1 / 3, 0.25, 0.2])
    lr = get_metrics.sync("genclient01", client=writer, key="lr")
    assert lr.series[0].last == ["NaN"] * 5  # strict JSON: NaN as a string
    missing = get_run.sync_detailed("nosuchrun01", client=anonymous)
    assert missing.status_code == 404 and missing.parsed.error.field == "run"
    csv = export_run.sync("genclient01", client=anonymous, format_=ExportRunFormat.CSV)  # a text answer: str
    assert csv.splitlines()[0] == "segment,key,step,value,time" and len(csv.splitlines()) == 11

    _, _, example = _docs()
    script = project.parent / "example.py"
    script.write_text(example.replace("http://127.0.0.1:8000", url).replace("rc_...", token))
    res = subprocess.run([sys.executable, "-W", "error", str(script)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(project)}, check=False)
    assert res.returncode == 0, res.stderr
