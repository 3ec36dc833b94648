"""One run on a server, as a script reads and changes it (``Api.run``, ``Api.runs``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from runcast.query import history
from runcast.query.client import Client
from runcast.query.errors import ApiError
from runcast.query.records import Alert, Checkpoint, RunInfo, Segment


class RemoteRun:
    """A run: its summary at once, its details (config, summary, notes, keys, segments) on first
    use; ``history()`` and ``scan_history()`` read its points, ``update()`` changes it."""

    def __init__(self, client: Client, info: dict[str, Any], detail: dict[str, Any] | None = None) -> None:
        self._client = client
        self._info = RunInfo.from_json(info)
        self._detail = detail

    def __repr__(self) -> str:
        return f"<RemoteRun {self._info.project}/{self._info.id} {self._info.name!r} ({self._info.status})>"

    @property
    def info(self) -> RunInfo:
        """The run's summary line, as ``GET /runs`` lists it."""
        return self._info

    @property
    def id(self) -> str:
        return self._info.id

    @property
    def name(self) -> str:
        return self._info.name

    @property
    def project(self) -> str:
        return self._info.project

    @property
    def status(self) -> str:
        return self._info.status

    @property
    def tags(self) -> list[str]:
        return list(self._info.tags)

    @property
    def group(self) -> str | None:
        return self._info.group

    @property
    def config(self) -> dict[str, Any]:
        """The config as started, with every ``run.config`` change applied."""
        return dict(self.detail["config"])

    @property
    def summary(self) -> dict[str, Any]:
        """``run.summary`` plus each declared metric's summary figure."""
        return dict(self.detail.get("summary") or {})

    @property
    def notes(self) -> str | None:
        notes: str | None = self.detail.get("notes")
        return notes

    @property
    def keys(self) -> list[str]:
        """Every metric name, sorted."""
        return list(self.detail["keys"])

    @property
    def segments(self) -> list[Segment]:
        return [Segment.from_json(s) for s in self.detail["segments"]]

    @property
    def detail(self) -> dict[str, Any]:
        """The whole ``GET /runs/{id}`` answer (read once; ``refresh()`` reads it again)."""
        if self._detail is None:
            self.refresh()
        assert self._detail is not None
        return self._detail

    def refresh(self) -> RemoteRun:
        """Read the run again from the server."""
        self._detail = self._client.call("GET", f"/runs/{self.id}")
        self._info = RunInfo.from_json(self._detail)
        return self

    def checkpoints(self) -> list[Checkpoint]:
        """The run's checkpoints, oldest first (``[]`` when its policy withholds them)."""
        answer = self._client.call("GET", f"/runs/{self.id}/checkpoints")
        return [Checkpoint.from_json(c) for c in answer["checkpoints"]]

    def alerts(self, state: str | None = None) -> list[Alert]:
        """The run's alerts, oldest first; ``state``: ``open`` or ``closed`` only."""
        params: dict[str, Any] = {"limit": 1000, **({"state": state} if state else {})}
        found: list[Alert] = []
        while True:
            page = self._client.call("GET", f"/runs/{self.id}/alerts", params=params)
            found += [Alert.from_json(a) for a in page["alerts"]]
            if not page.get("next_cursor"):
                return found
            params["after"] = page["next_cursor"]

    def history(self, keys: Iterable[str] | None = None, samples: int | None = None, pandas: bool = True) -> Any:
        """Every point of ``keys`` (default: every metric but ``system/…``) as rows ``_segment``, ``_step``,
        ``_timestamp`` (the step's wall time, epoch seconds), ``_runtime`` (seconds since the run
        started) and a column per key, sorted by segment and step: a pandas DataFrame when pandas is
        installed and ``pandas`` is true, else a list of dicts (a key without a point at that step is
        absent). ``samples``: at most that many rows, spread evenly (first and last kept)."""
        chosen = history.wanted(None if keys is None else list(keys), self.keys)
        names = chosen if chosen is not None else self.keys
        frame = pandas and history.installed("pandas")
        start = self.info.started_at
        if history.installed("pyarrow"):
            table = history.parquet_table(self._client, self.id, chosen)
            if frame:
                df = history.frame_times(history.frame_of_table(table), table, start).reindex(
                    columns=[history.SEGMENT, history.STEP, history.TIMESTAMP, history.RUNTIME, *names])
                picked = history.spaced(len(df), samples)
                return df if picked is None else df.iloc[picked].reset_index(drop=True)
            rows = history.rows_of_table(table)
        else:
            rows = history.rows_of(history.jsonl_points(self._client, self.id, chosen))
        rows = list(history.with_runtime(rows, start))
        picked = history.spaced(len(rows), samples)
        rows = rows if picked is None else [rows[i] for i in picked]
        return history.frame_of_rows(rows, names) if frame else rows

    def scan_history(self, keys: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
        """The rows of ``history(pandas=False)`` as they stream (JSONL export, one request): one
        segment's rows are held at a time, so a run of any size is read in bounded memory."""
        chosen = history.wanted(None if keys is None else list(keys), self.keys)
        if chosen is not None and len(chosen) == 1:
            points = history.jsonl_points(self._client, self.id, chosen)
        else:
            wanted = None if chosen is None else set(chosen)
            points = (p for p in history.jsonl_points(self._client, self.id, None) if wanted is None or p[1] in wanted)
        return history.with_runtime(history.segment_rows(points), self.info.started_at)

    def download_checkpoint(self, checkpoint: Checkpoint | int | str = "latest",
                            dest: str | os.PathLike[str] = ".", retries: int = 5) -> Path:
        """Download a checkpoint into ``dest`` (resumed and verified as ``runcast download`` does) and
        return its path. ``checkpoint``: a ``Checkpoint``, a step (int), or ``"latest"``."""
        from runcast.cli.download import DownloadError, download  # standard library and httpx only

        if isinstance(checkpoint, Checkpoint):
            wanted = str(checkpoint.id)
        elif isinstance(checkpoint, int) and not isinstance(checkpoint, bool):
            wanted = f"step:{checkpoint}"
        elif checkpoint == "latest":
            wanted = "latest"
        else:
            raise ValueError(f"checkpoint must be a Checkpoint, a step or 'latest', got {checkpoint!r}")
        try:
            done = download(self._client.server, self.id, wanted, dest, token=self._client.token, retries=retries)
        except DownloadError as exc:
            raise ApiError(str(exc), field="checkpoint") from exc
        return done.path

    def update(self, name: str | None = None, tags: Iterable[str] | None = None, notes: str | None = None,
               archived: bool | None = None) -> RemoteRun:
        """Rename, retag (``tags``: the run's tags from now on), annotate (``notes``; ``""`` clears) or
        archive the run, with a token of its project (``PATCH /runs/{id}``)."""
        body: dict[str, Any] = {}
        if name is not None:
            body["name"] = name
        if tags is not None:
            if isinstance(tags, str):
                raise TypeError("tags must be a list of tags, not one string")
            new, old = set(tags), set(self.tags)
            body["tags"] = {"add": sorted(new - old), "remove": sorted(old - new)}
        if notes is not None:
            body["notes"] = notes
        if archived is not None:
            body["archived"] = archived
        if body:
            self._info = RunInfo.from_json(self._client.call("PATCH", f"/runs/{self.id}", json=body))
            self._detail = None
        return self
