"""Every shell, Python and HTTP example of README.md and docs/*.md, run against a real embedded
``runcast serve`` (one per page, the page's examples in order), with the exit status the doc gives
(0 unless marked) and the output it shows after the example (tests/docs/outputs.py). An example
that cannot run here is marked in the doc's source and reported as skipped with its reason."""

from __future__ import annotations

import re

import pytest

from docs import outputs, runner
from docs.blocks import Example, all_examples
from docs.conftest import Workspaces
from docs.pages import COMMON, page
from docs.workspace import Workspace

EXAMPLES = all_examples()


def substitute(text: str, ws: Workspace) -> str:
    """The example with its placeholders replaced by the page's real values (tests/docs/pages.py)."""
    values = ws.values()
    for written, value in sorted({**COMMON, **page(ws.doc).substitutions}.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(written, value.format(**values))
    return text


def run(example: Example, ws: Workspace) -> tuple[runner.Result, str | None]:
    """Run the example; returns its result and the output its own block documents (a console block's)."""
    config = page(example.block.doc)
    text = substitute(example.block.text, ws)
    env = ws.env(client=config.client_env)
    if example.block.lang == "python":
        prelude = next((p for key, p in config.preludes.items() if key in example.block.text), "")
        return runner.python(prelude + "\n" + text, ws, env, config.timeout_s), None
    if example.block.lang == "http":
        return runner.http(text, ws), None
    documented = None
    if example.block.lang == "console":
        lines = text.splitlines()
        text = "\n".join(line[2:] for line in lines if line.startswith("$ "))
        documented = "\n".join(line for line in lines if not line.startswith("$ ")) or None
    return runner.shell(text, ws, env, config.timeout_s, example.stop_after_s), documented


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example(example: Example, workspaces: Workspaces) -> None:
    if example.not_run:
        pytest.skip(f"{example.name}: not run: {example.not_run}")
    ws = workspaces.get(example.block.doc)
    result, documented = run(example, ws)
    if example.stop_after_s is None:
        assert result.status == example.status, f"{example.name}: {result.describe()}"
    config = page(example.block.doc)
    output_file = next((f for key, f in config.output_files.items() if key in example.block.text), None)
    actual = (ws.cwd / substitute(output_file, ws)).read_text() if output_file else result.stdout
    problems = []
    for printed in re.findall(r"# prints: (.+)$", example.block.text, re.M):
        problems += outputs.text_problems(printed, result.stdout)
    if documented:
        problems += outputs.text_problems(documented, actual)
    if example.output is not None:
        check = outputs.json_problems if example.output.lang == "json" else outputs.text_problems
        problems += check(example.output.text, actual)
    assert not problems, (
        f"{example.name}: the output differs from {example.output.name if example.output else 'the doc'}:\n"
        + "\n".join(problems)
        + f"\n{result.describe()}"
    )
