"""``runcast import PATH...``: other tools' finished runs as Runcast runs (``runcast.importers``)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Self

import typer

from runcast.events import VISIBILITIES
from runcast.importers.registry import FORMATS

FormatName = Enum("FormatName", {name.replace("-", "_"): name for name in FORMATS}, type=str)  # type: ignore[misc]
Visibility = Enum("Visibility", {v: v for v in VISIBILITIES}, type=str)  # type: ignore[misc]


def import_command(
    sources: Annotated[list[str], typer.Argument(
        metavar="PATH...", show_default=False,
        help="Files, directories (TensorBoard logdir, wandb/, mlruns) or an MLflow tracking URI.")],
    fmt: Annotated[FormatName | None, typer.Option(
        "--format", case_sensitive=False, help="Read every PATH as this format (default: recognised per PATH).")] = None,
    project: Annotated[str, typer.Option(help="Project the runs go to (the token's).")] = "replay",
    name: Annotated[str | None, typer.Option(
        help="Run name (default: the source's); with several runs, a prefix: NAME:<source name>.")] = None,
    visibility: Annotated[Visibility, typer.Option(help="Who may read the imported runs.")] = Visibility.public,
    alerts: Annotated[bool, typer.Option("--alerts/--no-alerts", help="Run the alert detectors on the imported points.")] = True,
    events: Annotated[Path | None, typer.Option(
        help="Training logs: events JSON to show as notes (default: FILE's .events.json).")] = None,
    experiment: Annotated[list[str] | None, typer.Option(
        help="MLflow: only this experiment (name or id); repeatable.", show_default=False)] = None,
    server: Annotated[str | None, typer.Option(envvar="RUNCAST_SERVER", help="Runcast server URL.")] = None,
    token: Annotated[str | None, typer.Option(
        envvar="RUNCAST_TOKEN", help="Project ingest token.", show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Import finished runs from TensorBoard, MLflow, W&B, training logs or Runcast exports.

    Every PATH is read and checked before anything is sent; importing the same source
    again changes nothing (an interrupted import resumes). See docs/import.md.
    """
    from runcast import importers
    from runcast.transport import make_transport

    if not server:
        raise typer.BadParameter("needs a server: --server or RUNCAST_SERVER", param_hint="--server")
    if not server.startswith(("http://", "https://")):
        raise typer.BadParameter(f"{server!r} is not an http:// or https:// address", param_hint="--server")
    progress = _Progress(enabled=not quiet and sys.stderr.isatty())
    target = importers.Target(project=project, visibility=visibility.value, alerts=alerts)
    try:
        with progress:
            reading = progress.task("reading", total=None)
            options = importers.ReadOptions(
                events_path=events, experiments=tuple(experiment or ()), on_points=lambda n: progress.advance(reading, n)
            )
            runs = importers.read_all(sources, fmt.value if fmt else None, options)
            plans = importers.plan_all(runs, target, name=name)
            total = sum(run.points for run in runs)
            progress.finish(reading, total)
            sending = progress.task("sending", total=total)
            transport = make_transport(server, token)
            try:
                importers.send(plans, transport, on_batch=lambda batch: progress.advance(sending, batch.points))
            finally:
                transport.close()
    except (importers.ImportFailed, importers.SendFailed) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for plan in plans:
        run = plan.run
        typer.echo(f"run {plan.run_id}  {plan.name}: {run.points} points, {len(run.segments)} segment(s)")
    repeats = sum(run.repeats for run in runs)
    typer.echo(
        f"imported {total} points as {len(plans)} run(s), {sum(len(r.segments) for r in runs)} segment(s), "
        f"{sum(len(r.notes) for r in runs)} note(s)" + (f"; {repeats} repeated point(s) left out" if repeats else "")
    )


class _Progress:
    """rich progress bars on standard error when it is a terminal, else nothing."""

    def __init__(self, enabled: bool) -> None:
        self._bar: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            SpinnerColumn(), "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
            "points", "[progress.percentage]{task.fields[rate]}", TimeElapsedColumn(), TimeRemainingColumn(),
            console=Console(stderr=True),
        )

    def __enter__(self) -> Self:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def task(self, description: str, total: int | None) -> Any:
        return self._bar.add_task(description, total=total, rate="") if self._bar is not None else None

    def advance(self, task: Any, points: int) -> None:
        if self._bar is not None:
            self._bar.advance(task, points)
            speed = self._bar.tasks[task].speed
            if speed:
                self._bar.update(task, rate=f"{speed:,.0f}/s")

    def finish(self, task: Any, total: int) -> None:
        if self._bar is not None:
            self._bar.update(task, total=total, completed=total)
