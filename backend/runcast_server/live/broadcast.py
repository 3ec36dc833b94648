"""The cacheable broadcast: a run's updates as objects a shared cache may keep (docs/live.md,
"Following a run through a cache").

**Pieces.** Piece ``n`` holds the ``batch`` messages of run versions ``n*P+1 .. (n+1)*P``
(P = ``broadcast_piece_versions``), exactly as the stream sends them to the same reader. It
is sealed once all of them are visible to the reader (to the public: released by the
broadcast delay) and never changes afterwards: points, events and outputs are write-once, and
what else shapes it (the publication policy, ``public_paths``, P) is in the fingerprint its
URL carries. **The edge** is the highest visible version, the run's status, and the messages
after the last sealed piece (fewer than P).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy.orm import Session

from runcast_server.core.errors import NotFound
from runcast_server.live.frames import published_message
from runcast_server.live.replay import read_versions
from runcast_server.policy.apply import TEAM, View, public_view
from runcast_server.record.models import Run

# The shape of a piece; bumping it changes every fingerprint, so no cache mixes old and new.
FORMAT: Final = 1
# Pieces are bounded by versions, not points: a piece holds every point of its versions.
_NO_POINT_CAP: Final = 2**62


@dataclass(frozen=True)
class Side:
    """What one reader (the team, or anyone else) sees of a run now."""

    run_id: str
    team: bool
    version: int  # the highest version this reader may see
    status: str
    last_step: int | None
    view: View  # what the messages show (TEAM: everything)
    public_paths: bool
    piece_versions: int

    @property
    def fingerprint(self) -> str:
        """16 hex digits naming everything a piece's content depends on besides its versions."""
        shape: dict[str, Any] = {"format": FORMAT, "P": self.piece_versions}
        shape.update({"team": True} if self.team else {"policy": self.view.policy, "paths": self.public_paths})
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def sealed(self) -> int:
        """How many pieces are sealed (pieces ``0 .. sealed-1``)."""
        return self.version // self.piece_versions


def side(session: Session, run: Run, team: bool, piece_versions: int) -> Side:
    """``run`` as the team (live) or the public (its policy, and its delay as of now) sees it."""
    view = TEAM if team else public_view(session, run)
    h = view.horizon
    version, status, last_step = (run.version or 0, run.status, run.last_step) if h is None else (
        h.version, h.status, h.last_step)
    return Side(run.id, team, version, status, last_step, view, bool(run.public_paths), piece_versions)


def _messages(session: Session, s: Side, after: int, upto: int) -> list[dict[str, Any]]:
    """The reader's messages of versions ``(after, upto]`` (a version without a log row has none)."""
    if upto <= after:
        return []
    replay = read_versions(session, s.run_id, after, upto=upto, max_versions=upto - after,
                           max_points=_NO_POINT_CAP, unlogged_empty=True)
    if replay.messages is None or replay.current < upto:  # the run was deleted meanwhile
        raise NotFound("run", field="run")
    return [published_message(m, s.public_paths, s.view, s.team) for m in replay.messages]


def piece(session: Session, s: Side, n: int) -> dict[str, Any]:
    """Piece ``n`` (the caller checked it is sealed for ``s``)."""
    first, last = n * s.piece_versions + 1, (n + 1) * s.piece_versions
    return {"run": s.run_id, "piece": n, "first_version": first, "last_version": last,
            "policy": s.fingerprint, "messages": _messages(session, s, first - 1, last)}


def edge(session: Session, s: Side) -> dict[str, Any]:
    """The live edge: where the run is, and the messages after the last sealed piece."""
    after = s.sealed * s.piece_versions
    return {"run": s.run_id, "version": s.version, "status": s.status, "last_step": s.last_step,
            "piece_versions": s.piece_versions, "last_piece": s.sealed - 1 if s.sealed else None,
            "policy": s.fingerprint, "messages": _messages(session, s, after, s.version)}


def encode(body: dict[str, Any]) -> bytes:
    """Strict, compact JSON (values are already wire values: NaN as a string)."""
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
