"""``runcast eval import RESULTS.json --run RUN``: an lm-evaluation-harness results file as the run's
evaluations (``runcast.importers.lm_eval_results`` reads it, ``eval_plan`` makes the events)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from runcast.cli.exits import EXIT_FAILED, EXIT_USAGE, exit_status
from runcast.cli.remote import SERVER_HELP, Api, check_run_id
from runcast.importers import ImportFailed, SendFailed, send
from runcast.importers.eval_plan import EvalRequest, StoredRun, plan_evals
from runcast.importers.lm_eval_results import SUITE, HarnessResults, read
from runcast.wire.limits import MAX_SUITE_CHARS, MAX_TS

eval_app = typer.Typer(help="Evaluations of runs: import the results of an evaluation harness.", no_args_is_help=True)


def checkpoint_step(raw: str | None) -> int | None:
    """``step:N`` or ``N`` as the step N; BadParameter naming ``--checkpoint`` otherwise."""
    if raw is None:
        return None
    label, colon, number = raw.rpartition(":")
    if (colon and label != "step") or not number.isdigit() or int(number) > 2**53 - 1:
        raise typer.BadParameter(f"{raw!r} is not a checkpoint step: step:N or N", param_hint="--checkpoint")
    return int(number)


@eval_app.command("import")
def import_command(
    results: Annotated[Path, typer.Argument(exists=True, dir_okay=False,
                                            help="A results file lm-evaluation-harness wrote (lm_eval --output_path).")],
    run: Annotated[str, typer.Option(help="The run the scores belong to (its id).", show_default=False)],
    checkpoint: Annotated[str | None, typer.Option(
        metavar="step:N", help="The checkpoint evaluated: ties the scores to it, at step N.", show_default=False)] = None,
    step: Annotated[int | None, typer.Option(
        min=0, max=2**53 - 1, help="The step of the scores (default: the checkpoint's, else the run's last step).",
        show_default=False)] = None,
    suite: Annotated[str, typer.Option(help="The suite the tasks are listed under.")] = SUITE,
    server: Annotated[str | None, typer.Option(help=SERVER_HELP, show_default=False)] = None,
    token: Annotated[str | None, typer.Option(envvar="RUNCAST_TOKEN", help="A token of the run's project.",
                                              show_default=False)] = None,
) -> None:
    """Import an lm-evaluation-harness results file as the run's evaluations: one per task, its metrics,
    versions and configuration as the harness wrote them. Importing the same file again changes nothing."""
    check_run_id(run)
    if not suite.strip() or not suite.isprintable() or len(suite) > MAX_SUITE_CHARS:
        raise typer.BadParameter(f"must be 1-{MAX_SUITE_CHARS} printable characters", param_hint="--suite")
    request = EvalRequest(suite=suite, step=step, checkpoint=checkpoint_step(checkpoint))
    try:
        found = read(results)
        source = results.read_bytes()
    except ImportFailed as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    with Api(server, token) as api:
        stored = stored_run(api.call("GET", f"/runs/{run}"))
        base = api.base
    try:
        plan = plan_evals(found, source, stored, request)
    except ImportFailed as exc:
        typer.echo(f"error: {results}: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    from runcast.sender.transport import make_transport

    transport = make_transport(base, token)
    try:
        send([plan], transport)
    except SendFailed as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exit_status(exc.status) if exc.status else EXIT_FAILED) from None
    finally:
        transport.close()
    typer.echo(summary(found, plan.step, request))


def stored_run(answer: dict[str, Any]) -> StoredRun:
    """The run as ``GET /api/v1/runs/{id}`` describes it."""
    started = answer.get("started_at")
    return StoredRun(id=answer["id"], project=answer["project"], name=answer["name"], visibility=answer["visibility"],
                     status=answer["status"], started_at=float(started) if started is not None else 0.0,
                     finished_at=answer.get("finished_at"), last_step=answer.get("last_step"))


def summary(found: HarnessResults, step: int, request: EvalRequest) -> str:
    """What was imported, in one line (and the values left out, in a second)."""
    tied = f" of checkpoint step:{request.checkpoint}" if request.checkpoint is not None else ""
    date = f", evaluated {_utc(found.date)}" if found.date is not None and found.date <= MAX_TS else ""
    lines = [f"imported {len(found.tasks)} evaluation(s) of suite {request.suite!r} at step {step}{tied}{date}: "
             + ", ".join(t.task for t in found.tasks)]
    left = [f"{t.task} {name}" for t in found.tasks for name in t.left_out]
    if left or found.empty:
        lines.append("left out (not numbers): " + ", ".join(left + [f"{task} (no score)" for task in found.empty]))
    return "\n".join(lines)


def _utc(at: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))
