"""``GET /runs/{run_id}/batch?read=...``: several of a run's reads in one request (docs/api.md,
"Several reads in one request").

The run page's first load makes a dozen small reads (each panel's list, each chart's window); as
one request they are one lookup in a shared cache and one round trip for a viewer far away. Each
``read`` is a path under the run (``checkpoints``, ``metrics?key=loss&max_points=1500``) among
the reads a shared cache may keep (``shared_cache.READS``); the app answers each as it answers
that GET on its own, with the caller's credentials, so every answer (its body, its status, the
publication policy, the walls between projects) is exactly the single read's. The batch itself is
a run read like them: public and cacheable for anonymous callers, ``private`` with a token or a
session.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field
from starlette.types import Message, Scope

from runcast_server.api.one_hop import CheckedRunReadDep
from runcast_server.api.read_deps import RUN_ERRORS
from runcast_server.api.shared_cache import READS

router = APIRouter(tags=["runs"])

# A batch's URL stays under the server's and nginx's request-line limits (16 KiB, 8 KiB): 24 reads of
# at most 200 characters, each sent percent-encoded. A longer read goes alone (frontend/js/batch.js).
MAX_READS: Final = 24
MAX_READ_CHARS: Final = 200
BATCHED: Final = frozenset(READS) - {"batch"}
# The caller's headers a read depends on; nothing else (no If-None-Match: each answer is whole).
_PASSED: Final = frozenset({b"authorization", b"cookie", b"accept-language", b"user-agent"})

# The schema names the reads exactly (what a generated client or a fuzzer sends is what is taken); a
# read's query is URL-encoded, so printable ASCII.
_READ_PATTERN: Final = r"^(" + "|".join(sorted(BATCHED, key=lambda n: (-len(n), n))) + r")(\?[\x21-\x7e]*)?$"
ReadQuery = Annotated[
    list[Annotated[str, Field(max_length=MAX_READ_CHARS, pattern=_READ_PATTERN)]],
    Query(alias="read", min_length=1, max_length=MAX_READS,
          description="A read under the run, as its own GET's path and query (repeatable): `checkpoints`, "
                      "`metrics?key=train/loss&max_points=1500`."),
]


class BatchAnswer(BaseModel):
    read: str = Field(description="The read, as asked.")
    status: int = Field(description="What its own GET answers: 200, or its error's status.")
    body: Any = Field(description="What its own GET answers: its JSON, or its error's ({\"error\": ...}).")


class BatchList(BaseModel):
    run: str
    reads: list[BatchAnswer] = Field(description="One answer per `read`, in the order asked.")


def _split(read: str) -> tuple[str, str]:
    """``read`` (one of the run's reads: the schema's pattern took nothing else) as the path under the
    run and its query string, encoded again."""
    name, _, query = read.partition("?")
    return name, urlencode(parse_qsl(query, keep_blank_values=True))


async def _answer(request: Request, path: str, query: str) -> tuple[int, bytes]:
    """GET ``path`` through the whole app, as the caller (status, body)."""
    scope: Scope = {
        **{k: v for k, v in request.scope.items() if k in ("type", "asgi", "http_version", "scheme", "server",
                                                             "client", "root_path", "state")},
        "method": "GET", "path": path, "raw_path": path.encode(), "query_string": query.encode(),
        "headers": [(k, v) for k, v in request.scope["headers"] if k in _PASSED] + [(b"accept", b"application/json")],
    }
    status, json_body, chunks = 500, False, []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        nonlocal status, json_body
        if message["type"] == "http.response.start":
            status = message["status"]
            json_body = any(k == b"content-type" and v.startswith(b"application/json") for k, v in message["headers"])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await request.app(scope, receive, send)
    return status, b"".join(chunks) if json_body else b"null"


# The model documents the answer; the route writes its bytes itself (each body as it came).
@router.get("/runs/{run_id}/batch", response_model=BatchList, responses=RUN_ERRORS)
async def get_batch(request: Request, read: CheckedRunReadDep, reads: ReadQuery) -> Response:
    """Each ``read``'s status and body, in the order asked: ``{"run", "reads": [{"read", "status",
    "body"}]}``, each body what ``GET /runs/{run_id}/{read}`` answers the same caller."""
    asked = [(r, *_split(r)) for r in reads]
    base = f"/api/v1/runs/{read.run_id}/"
    parts = []
    for text, name, query in asked:
        status, body = await _answer(request, base + name, query)
        # Each answer's JSON goes in as it came (no second parse and dump of a metrics window).
        parts.append(b'{"read":%s,"status":%d,"body":%s}' % (json.dumps(text).encode(), status, body or b"null"))
    out = b'{"run":%s,"reads":[%s]}' % (json.dumps(read.run_id).encode(), b",".join(parts))
    return Response(out, media_type="application/json")
