"""``GET /tokens`` and ``DELETE /tokens/{token_id}``: a project's tokens, seen and revoked with one of them.

The secret is never shown again (only its hash is stored): a token is listed by id,
prefix, label and times. A revoked token authenticates nothing from the next request on.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel

from runcast_server.api.deps import SessionDep, TeamTokenDep
from runcast_server.core import auth
from runcast_server.core.errors import NotFound, error_responses
from runcast_server.core.models import IngestToken

router = APIRouter(tags=["tokens"])


class TokenInfo(BaseModel):
    id: int
    project: str
    prefix: str
    label: str | None
    created_at: float
    last_used_at: float | None
    revoked_at: float | None


class TokenList(BaseModel):
    tokens: list[TokenInfo]


def _info(token: IngestToken, project: str) -> TokenInfo:
    return TokenInfo(
        id=token.id, project=project, prefix=token.prefix, label=token.label, created_at=token.created_at,
        last_used_at=token.last_used_at, revoked_at=token.revoked_at,
    )


@router.get("/tokens", response_model=TokenList, responses=error_responses(401))
def list_tokens(session: SessionDep, project: TeamTokenDep) -> TokenList:
    """Every token of the presented token's project, revoked ones included; never a secret."""
    return TokenList(tokens=[_info(t, project.name) for t in auth.project_tokens(session, project.id)])


@router.delete("/tokens/{token_id}", response_model=TokenInfo, responses=error_responses(401, 404, 422))
def revoke_token(
    session: SessionDep,
    project: TeamTokenDep,
    token_id: Annotated[int, Path(ge=1, le=2**31 - 1, description="The token's id (GET /tokens).")],
) -> TokenInfo:
    """Revoke one of the project's tokens (the presented one included); another project's is a 404."""
    token = auth.revoke_token(session, project.id, token_id)
    if token is None:
        raise NotFound("token", field="token_id")
    return _info(token, project.name)
