"""Code revisions of a run: the ``code`` of each segment's run_started event.

A revision is one code state (sha, dirty flag and diff); consecutive segments with
the same state share it, and a segment whose state differs from the previous
segment's records a code change at its start step. A revision's id is the id of the
run_started event that first recorded it.

Diffs are served as text with credentials of a recognisable shape replaced by
``[SECRET]`` (``runcast.wire.scrub.scrub_credentials``): vendor-prefixed keys and values
assigned to key/token/password names. Nothing else in a diff is changed.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any
from urllib.parse import urlsplit

from runcast.wire.scrub import scrub_credentials
from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.policy.delay import Horizon
from runcast_server.record.models import Event, Segment

_SCP_LIKE = re.compile(r"^(?:[\w.-]+@)?(?P<host>[\w.-]+):(?!//)(?P<path>.+)$")  # git@github.com:org/repo.git


@dataclass
class Revision:
    id: int
    sha: str | None
    branch: str | None
    remote: str | None
    dirty: bool
    diff: str
    diff_truncated: bool
    segments: list[int] = field(default_factory=list)
    start_steps: list[int] = field(default_factory=list)
    ts: float = 0.0


def normalise_remote(remote: str | None) -> tuple[str, str, str] | None:
    """``(https_url, host, path)`` of a git remote, or None when it has no web form.

    ``git@host:org/repo.git``, ``ssh://git@host:22/org/repo``, ``https://user@host/org/repo.git``
    all give ``("https://host/org/repo", "host", "org/repo")``. Local paths and
    ``file://`` URLs give None.
    """
    if not remote:
        return None
    remote = remote.strip()
    match = _SCP_LIKE.match(remote) if "://" not in remote else None
    if match is not None:
        host, path = match.group("host"), match.group("path")
    else:
        parts = urlsplit(remote)
        if parts.scheme not in ("http", "https", "ssh", "git", "git+ssh", "ssh+git") or not parts.hostname:
            return None
        host, path = parts.hostname, parts.path
    path = path.strip("/")
    path = path.removesuffix(".git")
    if not host or not path or ".." in path.split("/"):
        return None
    return f"https://{host}/{path}", host, path


def code_link(template: str, revision: Revision) -> str | None:
    """The template filled in for ``revision``; None without a sha, a web remote, or a template."""
    if not template or not revision.sha:
        return None
    remote = normalise_remote(revision.remote)
    if remote is None and "{remote}" in template:
        return None
    url, host, path = remote or ("", "", "")
    try:
        return template.format(
            remote=url, host=host, path=path, sha=revision.sha, short_sha=revision.sha[:12], branch=revision.branch or ""
        )
    except (KeyError, IndexError, ValueError):
        return None


def _state(code: dict[str, Any]) -> tuple[Any, ...]:
    return (code.get("sha"), bool(code.get("dirty")), code.get("diff") or "")


def load_revisions(session: Session, run_id: str, horizon: Horizon | None = None) -> list[Revision]:
    """The run's revisions, in the order their first segment started (``horizon``: those due
    to a delayed reader, policy/delay.py)."""
    query = (
        select(Event.id, Event.ts, Event.payload, Segment.index, Segment.start_step)
        .join(Segment, Segment.id == Event.segment_id)
        .where(Event.run_id == run_id, Event.type == "run_started")
    )
    if horizon is not None:
        query = query.where(horizon.events_due())
    rows = session.execute(query.order_by(Segment.index, Event.id)).all()
    out: list[Revision] = []
    by_state: dict[tuple[Any, ...], Revision] = {}
    for event_id, ts, payload, index, start_step in rows:
        code = (payload or {}).get("code") or {}
        if not isinstance(code, dict) or not code.get("sha"):
            continue
        state = _state(code)
        rev = by_state.get(state)
        if rev is None:
            rev = Revision(
                id=event_id,
                sha=str(code.get("sha")),
                branch=code.get("branch"),
                remote=code.get("remote"),
                dirty=bool(code.get("dirty")),
                diff=str(code.get("diff") or ""),
                diff_truncated=bool(code.get("diff_truncated")),
                ts=ts,
            )
            by_state[state] = rev
            out.append(rev)
        rev.segments.append(index)
        rev.start_steps.append(start_step or 0)
    return out


def changes(revisions: list[Revision]) -> list[dict[str, Any]]:
    """Code changes between consecutive segments: ``{segment, step, from, to}`` (revision ids)."""
    by_segment = sorted(
        ((seg, step, rev) for rev in revisions for seg, step in zip(rev.segments, rev.start_steps)),
        key=lambda t: t[0],
    )
    out = []
    for (_, _, before), (seg, step, after) in pairwise(by_segment):
        if before.id != after.id:
            out.append({"segment": seg, "step": step, "from": before.id, "to": after.id})
    return out


def revision_json(rev: Revision, run_id: str, template: str) -> dict[str, Any]:
    diff_bytes = published_diff(rev)[0].encode("utf-8", "replace") if rev.diff else b""
    return {
        "id": rev.id,
        "sha": rev.sha,
        "short_sha": rev.sha[:12] if rev.sha else None,
        "branch": rev.branch,
        "remote": rev.remote,
        "dirty": rev.dirty,
        "diff_bytes": len(diff_bytes),
        "diff_sha256": hashlib.sha256(diff_bytes).hexdigest() if diff_bytes else None,
        "diff_truncated": rev.diff_truncated,
        "diff_url": f"/api/v1/runs/{run_id}/revisions/{rev.id}/diff" if rev.diff else None,
        "link": code_link(template, rev),
        "segments": rev.segments,
        "start_steps": rev.start_steps,
        "recorded_at": rev.ts,
    }


def published_diff(rev: Revision) -> tuple[str, dict[str, int]]:
    """The diff as served: credentials scrubbed; and how many were."""
    text, counts = scrub_credentials(rev.diff)
    return text, dict(counts)
