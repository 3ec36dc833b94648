"""``/api/v1/projects/{project}/members``: the people of a project and their roles, managed by its
owners (a signed-in owner, from this site's pages) or with a token that has the ``team`` scope.
Anyone else: the project is not found (404), as another project's token finds any of its things."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.api import access
from runcast_server.api.deps import SESSION_COOKIE, SessionDep, TokenDep, token_grant_dep
from runcast_server.core.errors import ApiError, NotFound, error_responses
from runcast_server.core.models import Project
from runcast_server.people import service as people
from runcast_server.sessions.service import lookup

router = APIRouter(tags=["people"])
ProjectPath = Annotated[str, Path(max_length=100, description="The project's name.")]
UserPath = Annotated[str, Path(max_length=100, description="The account's name.")]


class Member(BaseModel):
    name: str
    display_name: str
    role: Literal["owner", "member", "viewer"]


class Members(BaseModel):
    project: str
    members: list[Member]


class RoleBody(BaseModel):
    role: Literal["owner", "member", "viewer"] = Field(description="The role to give.")


def _owned(request: Request, session: Session, token: str | None, name: str) -> Project:
    """The project ``name`` if the caller manages its members (a team token of it, or its owner's
    session from this site); 404 otherwise."""
    if token is not None:
        own = access.check_scope(token_grant_dep(session, token), "team")
        if own.name != name:
            raise NotFound("project", field="project")
        return own
    found = lookup(session, request.cookies.get(SESSION_COOKIE))
    if found is None or found.user is None:
        raise ApiError(401, "sign in as an owner of the project, or send a token with the 'team' scope",
                       field="Authorization")
    if not access.is_same_site(request):
        raise ApiError(403, "a signed-in browser's changes are accepted only from this site's pages", field="Origin")
    project = session.scalar(select(Project).where(Project.name == name))
    role = None if project is None else people.role_of(session, found.user.id, project.id)
    if project is None or role is None:
        raise NotFound("project", field="project")
    if role != "owner":
        raise ApiError(403, f"only an owner of {name} manages its members (you are a {role})", field=SESSION_COOKIE)
    return project


def _members(session: Session, project: Project) -> Members:
    return Members(project=project.name, members=[
        Member(name=u.name, display_name=u.display_name, role=r)  # type: ignore[arg-type]
        for u, r in people.members(session, project.id)])


@router.get("/projects/{project}/members", response_model=Members, responses=error_responses(401, 403, 404, 422))
def list_members(request: Request, session: SessionDep, token: TokenDep, project: ProjectPath) -> Members:
    """The project's people and their roles (for its owners and its team tokens)."""
    return _members(session, _owned(request, session, token, project))


@router.put("/projects/{project}/members/{user}", response_model=Members,
            responses=error_responses(401, 403, 404, 422))
def put_member(request: Request, session: SessionDep, token: TokenDep, project: ProjectPath, user: UserPath,
               body: RoleBody) -> Members:
    """Give account ``user`` a role in the project (replacing the one it had)."""
    proj = _owned(request, session, token, project)
    person = people.find_user(session, user)
    if person is None:
        raise NotFound("user", field="user")
    people.grant(session, proj, person, body.role)
    return _members(session, proj)


@router.delete("/projects/{project}/members/{user}", response_model=Members,
               responses=error_responses(401, 403, 404, 422))
def delete_member(request: Request, session: SessionDep, token: TokenDep, project: ProjectPath,
                  user: UserPath) -> Members:
    """Take account ``user``'s role in the project away (404 if it had none)."""
    proj = _owned(request, session, token, project)
    person = people.find_user(session, user)
    if person is None or not people.revoke(session, proj, person):
        raise NotFound("member", field="user")
    return _members(session, proj)
