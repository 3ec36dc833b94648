"""SSE frames: one message encoded once per process, for both kinds of reader."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from runcast_server.outputs.stream import KINDS
from runcast_server.policy.apply import TEAM, View
from runcast_server.reads.published import published_payload

RETRY_MS: Final = 1000  # the reconnect delay suggested to EventSource clients


@dataclass(frozen=True)
class Frame:
    """One encoded SSE message (shared, never copied, by every viewer of a process)."""

    version: int
    data: bytes  # as every reader may see it
    reset: bool = False
    project: bytes | None = None  # for readers with a token of the run's project, when it differs
    policy: str = ""  # the publication policy ``data`` was built under (View.key)
    committed_at: float = 0.0  # when the version was stored (a delayed run's public copy is due delay_s later)
    notice: bool = False  # outside the version sequence (``comments_frame``): sent as is to every viewer

    def for_reader(self, project_reader: bool) -> bytes:
        return self.project if project_reader and self.project is not None else self.data


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def _published(message: dict[str, Any], full: bool, project: bool, view: View = TEAM) -> dict[str, Any]:
    events = [{**e, "payload": published_payload(e["type"], e["payload"], full, project)} for e in message["events"]]
    wire = {k: v for k, v in message.items() if k != "committed_at"}
    shown = {kind: view.outputs(kind, message[kind]) for kind in KINDS}
    return {**wire, "points": view.points(message["points"]), "events": view.events(events), **shown}


def published_message(message: dict[str, Any], public_paths: bool, view: View, team: bool) -> dict[str, Any]:
    """A ``batch`` message's ``data`` as one kind of reader gets it: the team (everything), or
    anyone else under ``view`` (the run's public policy), exactly as the stream sends it."""
    return _published(message, True, True) if team else _published(message, public_paths, False, view)


def batch_frame(message: dict[str, Any], public_paths: bool = False, policy: View = TEAM) -> Frame:
    """``id: <version>`` / ``event: batch`` / ``data: <message>``, for both kinds of reader.

    ``message`` is one of ``read_versions``'s (event payloads as stored); ``public_paths``:
    the run opted in, so every reader sees its paths (not its private checkpoints' files);
    ``policy``: what the run's publication policy shows readers outside its project.
    """
    v = message["version"]

    def encode(m: dict[str, Any]) -> bytes:
        return f"id: {v}\nevent: batch\ndata: {_dumps(m)}\n\n".encode()

    public = encode(published_message(message, public_paths, policy, False))
    project = encode(published_message(message, public_paths, policy, True)) if message["events"] or policy.withheld() else public
    return Frame(v, public, project=None if project == public else project, policy=policy.key,
                 committed_at=float(message.get("committed_at") or 0.0))


def reset_frame(version: int) -> Frame:
    """``event: reset``: the client should reload through REST; live batches after ``version`` follow."""
    return Frame(version, f"id: {version}\nevent: reset\ndata: {_dumps({'version': version})}\n\n".encode(), True)
def comments_frame(run_id: str, comment_id: int, change: str) -> Frame:
    """``event: comments``: the run's comments changed; the page reads them again through REST
    (which applies the reader's rights and the run's policy). No ``id:``: the resume point stays."""
    data = _dumps({"run": run_id, "comment": comment_id, "change": change})
    return Frame(0, f"event: comments\ndata: {data}\n\n".encode(), notice=True)


def reports_frame(run_id: str, number: int, change: str) -> Frame:
    """``event: reports``: a report of the run was published or unpublished; the page reads the run's
    reports again through REST (which applies the reader's rights). No ``id:``, as ``comments_frame``."""
    data = _dumps({"run": run_id, "report": number, "change": change})
    return Frame(0, f"event: reports\ndata: {data}\n\n".encode(), notice=True)


def commands_frame(run_id: str, command: str, change: str) -> Frame:
    """``event: commands``: a command of the run was sent or resolved; the page reads the run's commands
    and timeline again through REST (which apply the reader's rights and the run's policy). As ``comments_frame``."""
    data = _dumps({"run": run_id, "command": command, "change": change})
    return Frame(0, f"event: commands\ndata: {data}\n\n".encode(), notice=True)


def notice_frame(run_id: str, message: dict[str, Any]) -> Frame | None:
    """The notice a hub message announces (``comments``, ``reports`` or ``commands``), else None (a batch)."""
    if isinstance(message.get("comments"), dict):
        return comments_frame(run_id, int(message["comments"].get("id", 0)), str(message["comments"].get("change", "")))
    if isinstance(message.get("reports"), dict):
        return reports_frame(run_id, int(message["reports"].get("number", 0)), str(message["reports"].get("change", "")))
    if isinstance(message.get("commands"), dict):
        return commands_frame(run_id, str(message["commands"].get("id", "")), str(message["commands"].get("change", "")))
    return None


KEEPALIVE: Final = b": keep-alive\n\n"
PREAMBLE: Final = f"retry: {RETRY_MS}\n\n".encode()
