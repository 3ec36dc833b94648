"""MLflow runs, read through ``MlflowClient``: a tracking server, a database or a local ``mlruns`` store.

The source is a tracking URI (``http(s)://`` server, ``sqlite:///…`` and other database
URIs), a ``.db`` file (SQLite store), a directory holding ``mlflow.db``, or a file store
directory (``mlruns``, with ``<experiment id>/meta.yaml``). Every active run of every
active experiment is imported (``experiments`` narrows it to names or ids).

Mapping: the run name is MLflow's; params become the config (MLflow keeps them as
text, and so does Runcast); tags other than MLflow's own ``mlflow.*`` become run tags
``key:value`` (``key`` when the value is empty; one the wire cannot hold stays in ``env.tags``);
the run's description (``mlflow.note.content``) its notes; each metric's full history (``get_metric_history``: value, step,
timestamp in milliseconds) becomes the points, in time order. A metric logged without
steps (every point at step 0) is numbered 0, 1, 2, ... in time order, so no point is
lost. Text and image artifacts become samples and media (``mlflow_artifacts``). Status
FINISHED, FAILED, KILLED map to finished, failed, killed; a run still
RUNNING or SCHEDULED gets no ``finished`` event. The MLflow run id is the identity, so
the run is the same whether it is read from the server or from its store.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import re
from array import array
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any, Final

from runcast.importers import mlflow_artifacts, run_fields
from runcast.importers.model import ImportFailed, MissingExtra, RunBuilder, SourceRun

NAME: Final = "mlflow"
STATUSES: Final = {"FINISHED": "finished", "FAILED": "failed", "KILLED": "killed"}
NOTE_TAG: Final = "mlflow.note.content"  # the run's description in MLflow's UI
_URI: Final = re.compile(r"^(https?|file|sqlite|postgresql|mysql|mssql)(\+\w+)?:", re.IGNORECASE)
_SQLITE_MAGIC: Final = b"SQLite format 3\x00"
_PAGE: Final = 1000


def is_uri(source: str) -> bool:
    return bool(_URI.match(source))


def is_store(path: Path) -> bool:
    """A local MLflow store: a file store directory, a directory with ``mlflow.db``, or an SQLite file."""
    if path.is_file():
        return _is_sqlite(path)
    return (path / "mlflow.db").is_file() or any(p.is_file() for p in path.glob("*/meta.yaml"))


def tracking_uri(source: str) -> str:
    """The tracking URI ``MlflowClient`` is given for a source."""
    if is_uri(source):
        return source
    path = Path(source).resolve()
    if path.is_file():
        return f"sqlite:///{path}"
    if (path / "mlflow.db").is_file():
        return f"sqlite:///{path / 'mlflow.db'}"
    return path.as_uri()


def read(source: str, experiments: Sequence[str] = (), on_points: Callable[[int], None] = lambda n: None) -> list[SourceRun]:
    uri = tracking_uri(source)
    shown = source if not is_uri(source) else _public(source)
    if uri.lower().startswith(("http://", "https://")):
        _reachable(uri, shown)
    try:
        from mlflow import MlflowClient
        from mlflow.entities import ViewType
        from mlflow.exceptions import MlflowException
    except ImportError:
        raise MissingExtra(f"MLflow store {shown}", "mlflow-skinny", "mlflow") from None
    store = Path(uri.removeprefix("file://")) if uri.startswith("file:") else None
    try:
        with _file_store_allowed(uri):
            client = MlflowClient(tracking_uri=uri)
            experiment_ids = _experiments(client, ViewType, experiments, shown)
            runs = []
            for run in _runs(client, ViewType, experiment_ids):
                runs.append(_read_run(client, run, shown, store, on_points))
    except ImportFailed:
        raise
    except MlflowException as exc:
        raise ImportFailed(shown, f"MLflow: {exc.message}") from None
    except Exception as exc:  # noqa: BLE001
        # A damaged store fails inside MLflow's store layer with whatever it raises
        # (SQLAlchemy's DatabaseError for a damaged database, ValueError, YAML errors).
        where = (_bad_metric_line(store) if store is not None else None) or shown
        raise ImportFailed(where, f"MLflow cannot read this store ({_first_line(exc)})") from None
    return runs


def _experiments(client: Any, view: Any, wanted: Sequence[str], shown: str) -> list[str]:
    found = client.search_experiments(view_type=view.ACTIVE_ONLY)
    if not wanted:
        return [e.experiment_id for e in found]
    by_key = {e.name: e.experiment_id for e in found} | {e.experiment_id: e.experiment_id for e in found}
    missing = [w for w in wanted if w not in by_key]
    if missing:
        raise ImportFailed(shown, f"no active experiment named {', '.join(map(repr, missing))} (--experiment)")
    return sorted({by_key[w] for w in wanted})


def _runs(client: Any, view: Any, experiment_ids: list[str]) -> Iterator[Any]:
    if not experiment_ids:
        return
    token = None
    while True:
        page = client.search_runs(
            experiment_ids, run_view_type=view.ACTIVE_ONLY, max_results=_PAGE, order_by=["attributes.start_time ASC"], page_token=token
        )
        yield from page
        token = page.token
        if not token:
            return


def _read_run(client: Any, run: Any, shown: str, store: Path | None, on_points: Callable[[int], None]) -> SourceRun:
    info, data = run.info, run.data
    histories = []
    for key in sorted(data.metrics):
        try:
            history = client.get_metric_history(info.run_id, key)
        except Exception as exc:  # noqa: BLE001 (see read)
            where = f"{shown} (run {info.run_id}, metric {key!r})"
            if store is not None:
                where = _bad_metric_line(store) or where
            raise ImportFailed(where, f"MLflow cannot read this metric ({_first_line(exc)})") from None
        # In time order (ties: as stored); MLflow objects are dropped as soon as they are read.
        order = sorted(range(len(history)), key=lambda i: history[i].timestamp)
        renumber = len(history) > 1 and all(m.step == 0 for m in history)
        histories.append(
            (
                array("q", (history[i].timestamp for i in order)),
                key,
                array("q", range(len(order))) if renumber else array("q", (history[i].step for i in order)),
                array("d", (history[i].value for i in order)),
            )
        )
        on_points(len(history))
    builder = RunBuilder()
    try:
        for ms, key, step, value in heapq.merge(*(zip(t, repeat(k), s, v) for t, k, s, v in histories)):
            builder.add(key, step, value, ms / 1000.0)
    except ValueError as exc:
        raise ImportFailed(f"{shown} (run {info.run_id})", str(exc)) from None
    try:
        for output in mlflow_artifacts.outputs(client, info.run_id):
            builder.add_output(output)
    except ValueError as exc:
        raise ImportFailed(f"{shown} (run {info.run_id})", str(exc)) from None
    tags, other_tags = _tags(data.tags)
    experiment = client.get_experiment(info.experiment_id)
    return builder.build(
        format=NAME,
        identity=info.run_id,
        name=info.run_name or info.run_id,
        config=dict(sorted(data.params.items())),
        env={
            "imported_from": {"format": NAME, "run_id": info.run_id, "experiment": experiment.name if experiment else None},
            **({"tags": other_tags} if other_tags else {}),
        },
        status=STATUSES.get(info.status),
        tags=tags,
        description=run_fields.clip_notes(data.tags.get(NOTE_TAG)),
    )


def _tags(source: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(run tags ``key:value``, the tags that cannot be run tags, as MLflow has them)."""
    mine = {k: v for k, v in sorted(source.items()) if not k.startswith("mlflow.")}
    as_tags = {f"{k}:{v}" if v else k: k for k, v in mine.items()}
    tags, rest = run_fields.split_tags(as_tags)
    return tags, {as_tags[t]: mine[as_tags[t]] for t in rest}


@contextlib.contextmanager
def _file_store_allowed(uri: str) -> Iterator[None]:
    """MLflow 3 refuses a file store unless told otherwise; reading an old ``mlruns`` is what import is for."""
    if not uri.startswith("file:"):
        yield
        return
    before = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        yield
    finally:
        if before is None:
            del os.environ["MLFLOW_ALLOW_FILE_STORE"]
        else:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = before


def _reachable(uri: str, shown: str) -> None:
    """Fail at once on a server that does not answer (MLflow's client would retry for minutes)."""
    import httpx

    try:
        httpx.get(uri.rstrip("/") + "/health", timeout=10)
    except httpx.HTTPError as exc:
        raise ImportFailed(shown, f"the MLflow tracking server does not answer ({type(exc).__name__}: {exc})") from None


def _bad_metric_line(root: Path) -> str | None:
    """``FILE:LINE`` of the first line of a file store's metric files (``<experiment>/<run>/metrics/<key>``)
    that is not ``ms value [step]``: only to name the place in an error, MLflow's own message does not.
    """
    files = sorted(p for p in root.glob("*/*/metrics/**/*") if p.is_file())
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    parts = line.split()
                    try:
                        if len(parts) not in (2, 3, 5):
                            raise ValueError(line)
                        int(parts[0]), float(parts[1]), int(parts[2]) if len(parts) > 2 else 0
                    except ValueError:
                        return f"{path}:{number}"
        except OSError:
            continue
    return None


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def _public(uri: str) -> str:
    from runcast.sender.transport import public_url

    return public_url(uri)
