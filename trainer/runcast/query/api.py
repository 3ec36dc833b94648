"""``runcast.Api``: the runs of one server, read (and changed) from Python."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final, Self

from runcast.query.client import Client
from runcast.query.errors import ApiError
from runcast.query.run import RemoteRun
from runcast.wire.events import ID_RE

ORDERS: Final = ("-created_at", "+created_at", "created_at")
STATUSES: Final = ("running", "finished", "failed", "killed", "stalled")


class Api:
    """A client of one server (``server``, else RUNCAST_SERVER, else http://127.0.0.1:8000) with a
    project token (``token``, else RUNCAST_TOKEN; none: public runs only)::

        api = runcast.Api()
        for run in api.runs("tinygpt", tags=["baseline"]):
            print(run.name, run.summary)
        df = api.run("q3VfX0c8kPZ2").history(["train/loss"])
    """

    def __init__(self, server: str | None = None, token: str | None = None, timeout: float = 60.0) -> None:
        self._client = Client(server, token, timeout)

    @property
    def server(self) -> str:
        return self._client.server

    def close(self) -> None:
        """Close the connections (``with runcast.Api() as api:`` does it on leaving)."""
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, path: str) -> RemoteRun:
        """One run by id, or by W&B's kind of path: ``"project/run_id"`` or ``"entity/project/run_id"``
        (the entity is ignored: a server's projects have no owner above them). ``ApiError`` with
        status 404 for an unknown run, one hidden from this token, or one of another project than
        the path names."""
        project, run_id = _run_path(path)
        detail = self._client.call("GET", f"/runs/{run_id}")
        found = RemoteRun(self._client, detail, detail)
        if project is not None and found.project != project:
            raise ApiError(f"run {run_id} is not in project {project!r}", 404, "path")
        return found

    def runs(
        self,
        project: str | None = None,
        *,
        status: str | None = None,
        tags: str | Iterable[str] | None = None,
        group: str | None = None,
        archived: str = "exclude",
        order: str = "-created_at",
        per_page: int = 50,
    ) -> Iterator[RemoteRun]:
        """The runs this token may see (public ones, and every run of its project), page by page:
        newest first (``order="-created_at"``) or oldest first (``"+created_at"``: every page is read
        before the first run is yielded). ``project`` may be W&B's ``"entity/project"``; ``tags``: runs
        holding all of them; ``archived``: ``exclude``, ``include`` or ``only``."""
        if project is not None and "/" in project:  # W&B's "entity/project"
            project = project.rpartition("/")[2]
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
        if status is not None and status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
        if not 1 <= per_page <= 200:
            raise ValueError(f"per_page must be 1 to 200, got {per_page}")
        wanted = [tags] if isinstance(tags, str) else list(tags or [])
        params: dict[str, Any] = {"limit": per_page, "archived": archived}
        params.update({k: v for k, v in (("project", project), ("status", status), ("group", group)) if v})
        if wanted:
            params["tag"] = wanted[0]  # the server filters by one tag; the rest here
        pages = self._pages(params, set(wanted[1:]))
        return pages if order == "-created_at" else iter(list(pages)[::-1])

    def _pages(self, params: dict[str, Any], more_tags: set[str]) -> Iterator[RemoteRun]:
        while True:
            page = self._client.call("GET", "/runs", params=params)
            for info in page["runs"]:
                if more_tags <= set(info.get("tags") or ()):
                    yield RemoteRun(self._client, info)
            if not page.get("next_cursor"):
                return
            params = {**params, "cursor": page["next_cursor"]}


def _run_path(path: str) -> tuple[str | None, str]:
    """``run_id``, ``project/run_id`` or ``entity/project/run_id`` as (project or None, run id)."""
    parts = path.split("/") if isinstance(path, str) else []
    if not 1 <= len(parts) <= 3 or not ID_RE.match(parts[-1]) or not all(parts):
        raise ValueError("a run is its id (8-64 characters of A-Z, a-z, 0-9, '_' or '-'), 'project/id' or "
                         f"'entity/project/id', got {path!r}")
    return (parts[-2] if len(parts) > 1 else None), parts[-1]
