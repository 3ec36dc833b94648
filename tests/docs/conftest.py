"""The docs' examples: one workspace (server, token, directories) per page, kept while the page's
examples run in order, and the count of what ran and what is marked, printed at the end."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from docs import runner
from docs.blocks import all_examples
from docs.pages import page
from docs.workspace import Workspace

_OUTCOMES: Counter[str] = Counter()  # of test_example, this session


class Workspaces:
    """The workspace of the page being run; the previous page's is stopped when the next one starts."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.current: Workspace | None = None
        self.broken: str | None = None  # why the current page's setup failed

    def get(self, doc: str) -> Workspace:
        if self.current is None or self.current.doc != doc:
            self.close()
            self.current = Workspace(doc, self.base / doc.replace("/", "_"), page(doc).project)
            try:
                self._set_up(self.current)
            except Exception as exc:
                self.broken = f"the setup of {doc} failed: {exc}"
        if self.broken:
            pytest.fail(self.broken)
        return self.current

    @staticmethod
    def _set_up(ws: Workspace) -> None:
        config = page(ws.doc)
        ws.prepare()
        if config.server:
            ws.serve(**config.server_env)
        for script in config.setup:
            done = runner.python(script, ws, ws.env(), timeout=config.timeout_s)
            if done.status != 0:
                raise RuntimeError(done.describe())
        if config.background:
            (ws.base / "background.py").write_text(config.background)
            ws.start([sys.executable, str(ws.base / "background.py")], "background")

    def close(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None
        self.broken = None


@pytest.fixture(scope="session")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspaces]:
    spaces = Workspaces(tmp_path_factory.mktemp("docs-examples"))
    try:
        yield spaces
    finally:
        spaces.close()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "test_examples.py::test_example[" in report.nodeid and (report.when == "call" or report.outcome != "passed"):
        _OUTCOMES[report.outcome] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _OUTCOMES:
        return
    examples = all_examples()
    marked = Counter(e.not_run for e in examples if e.not_run)
    write = terminalreporter.write_line
    terminalreporter.section("docs examples (tests/docs/test_examples.py)")
    write(
        f"{len(examples)} examples in README.md and docs/*.md: {len(examples) - sum(marked.values())} run here, "
        f"{sum(marked.values())} marked as not run"
    )
    write(
        f"this session: {_OUTCOMES['passed']} passed, {_OUTCOMES['failed']} failed, {_OUTCOMES['skipped']} skipped (the marked ones)"
    )
    write("marked, by reason:")
    for reason, n in sorted(marked.items(), key=lambda item: (-item[1], item[0])):
        write(f"  {n:3}  {reason}")
