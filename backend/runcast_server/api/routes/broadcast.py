"""``GET /runs/{run_id}/broadcast/edge`` and ``/broadcast/pieces/{piece}``: the cacheable broadcast.

A public reader's answers are shared HTTP objects (a sealed piece is immutable for a year, the
edge lives about a second), so a cache in front answers a crowd with a number of origin
requests that does not grow with it. A request with a token or a session cookie is answered
``private, no-store``, whatever it sees. live/broadcast.py builds the bodies; docs/live.md,
"Following a run through a cache", is the protocol.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Path, Query, Request, Response

from runcast_server.api.deps import SESSION_COOKIE, TokenDep
from runcast_server.api.one_hop import CheckedRunReadDep, Reading, RunReadDep
from runcast_server.core.errors import ApiError, error_responses
from runcast_server.live import broadcast
from runcast_server.live.schemas import BroadcastEdge, BroadcastPiece
from runcast_server.share.http import etag_of, fresh

router = APIRouter(tags=["stream"])

IMMUTABLE: Final = "public, max-age=31536000, immutable"
# A cache keeps the edge a second, and may answer with it one more while it fetches the next.
EDGE: Final = "public, max-age=1, stale-while-revalidate=1"
PRIVATE: Final = "private, no-store"
NO_STORE: Final = "no-store"
# The answer depends on the caller's credentials: a cache must never hand one caller's to another.
VARY: Final = "Authorization, Cookie"
FINGERPRINT: Final = r"^[0-9a-f]{16}$"
MAX_PIECE: Final = 10**15
_NOT_MODIFIED: dict[int | str, dict[str, Any]] = {304: {"description": "The caller's If-None-Match names the current ETag."}}


def _credentialed(request: Request, token: str | None) -> bool:
    return token is not None or SESSION_COOKIE in request.cookies


def _side(r: Reading) -> broadcast.Side:
    return broadcast.side(r.session, r.run, r.team, r.context.settings.broadcast_piece_versions)


def _answer(request: Request, body: bytes, cache_control: str, credentialed: bool) -> Response:
    headers = {"ETag": etag_of(body), "Cache-Control": PRIVATE if credentialed else cache_control, "Vary": VARY}
    if fresh(request, headers["ETag"]):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


@router.get(
    "/runs/{run_id}/broadcast/edge",
    response_model=None,
    responses={200: {"model": BroadcastEdge, "description": "The edge (`public, max-age=1` when anonymous)."},
               **_NOT_MODIFIED, **error_responses(401, 404, 422)},
)
async def get_broadcast_edge(request: Request, token: TokenDep, read: RunReadDep) -> Response:
    """The run's live edge: the highest version the caller may see (a delayed run: the last one due),
    its status, the piece size P, the last sealed piece, the messages after it and the policy
    fingerprint that piece URLs carry. Cached by shared caches for a second when anonymous."""
    def edge(r: Reading) -> bytes:
        return broadcast.encode(broadcast.edge(r.session, _side(r)))

    return _answer(request, await read(edge), EDGE, _credentialed(request, token))


@router.get(
    "/runs/{run_id}/broadcast/pieces/{piece}",
    response_model=None,
    responses={200: {"model": BroadcastPiece, "description": "The piece (immutable: cached for a year)."},
               **_NOT_MODIFIED, **error_responses(401, 404, 409, 422)},
)
async def get_broadcast_piece(
    request: Request, token: TokenDep, read: CheckedRunReadDep,
    piece: Annotated[int, Path(ge=0, le=MAX_PIECE, description="n: versions n*P+1 .. (n+1)*P.")],
    policy: Annotated[str, Query(pattern=FINGERPRINT, description="The fingerprint the edge names.")],
) -> Response:
    """A sealed piece: the ``batch`` messages of versions n*P+1 .. (n+1)*P as the stream sends them to
    the caller. 404 (``piece``) until every one of them is visible to the caller; 409 (``policy``) when
    ``policy`` is not the run's fingerprint now (read the edge again). Immutable once served."""
    def sealed(r: Reading) -> bytes:
        s = _side(r)
        if policy != s.fingerprint:
            raise ApiError(409, "the run's publication policy is not this one: read the edge again", field="policy",
                           headers={"Cache-Control": NO_STORE})
        if piece >= s.sealed:
            raise ApiError(404, "piece not sealed yet (the edge names the last sealed one)", field="piece",
                           headers={"Cache-Control": NO_STORE})
        return broadcast.encode(broadcast.piece(r.session, s, piece))

    return _answer(request, await read(sealed), IMMUTABLE, _credentialed(request, token))
