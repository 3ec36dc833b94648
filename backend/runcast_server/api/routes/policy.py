"""``GET/PUT /runs/{run_id}/policy`` and ``GET/PUT /projects/{project}/policy``: a token of the
run's (project's) project only; another project's token gets the 404 of an unknown id.

A PUT body holds the settings to change (``runcast.wire.policy``); ``null`` returns a setting to
the layer below (the project's default, then everything public). The change takes effect
at once: the run's live viewers get ``event: reset`` and reload under it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path
from runcast.wire.events import ID_RE, PROJECT_RE
from runcast.wire.policy import PolicyError, check_policy, effective

from runcast_server.api.deps import ContextDep, ReaderDep, SessionDep, TeamDep
from runcast_server.api.documented import json_body, ref
from runcast_server.core.errors import ApiError, NotFound, error_responses
from runcast_server.core.models import Project
from runcast_server.policy import store
from runcast_server.policy.schemas import PolicyChange, ProjectPolicyView, RunPolicyView
from runcast_server.runs import manage

router = APIRouter(tags=["policy"])
ERRORS = error_responses(401, 404, 422)
# Read as any JSON: runcast.wire.policy.check_policy answers every bad body with a 422 naming the setting.
# The document declares it as PolicyChange (DOCUMENTED in api/__init__.py).
PolicyBody = Annotated[Any, Body(description="Settings to change, e.g. {\"metrics\": [\"train/*\"]} "
                                             "(docs/api.md#publication-policy).")]
BODY_DOC = json_body(ref(PolicyChange))


def _checked(body: Any) -> dict[str, Any]:
    try:
        return check_policy(body, text=False)
    except PolicyError as exc:
        raise ApiError(422, exc.message, field=exc.field) from None


def _project(session: Any, name: str, writer: Project) -> Project:
    if not PROJECT_RE.match(name) or name != writer.name:
        raise NotFound("project", field="project")
    return writer


def _run_answer(session: Any, run: Any) -> dict[str, Any]:
    project, own = store.project_settings(session, run.project_id), store.run_settings(session, run.id)
    return {"run": run.id, "policy": effective(project, own), "run_settings": own, "project_settings": project}


@router.get("/runs/{run_id}/policy", response_model=RunPolicyView, responses=ERRORS)
def get_run_policy(session: SessionDep, writer: ReaderDep,
                   run_id: Annotated[str, Path(max_length=64, description="The run id.")]) -> dict[str, Any]:
    """The policy in force (``policy``), the run's own settings and its project's default."""
    if not ID_RE.match(run_id):
        raise NotFound("run", field="run")
    return _run_answer(session, manage.owned_run(session, run_id, writer))


@router.put("/runs/{run_id}/policy", response_model=RunPolicyView, responses=ERRORS, openapi_extra=BODY_DOC)
def put_run_policy(session: SessionDep, ctx: ContextDep, writer: TeamDep, body: PolicyBody,
                   run_id: Annotated[str, Path(max_length=64, description="The run id.")]) -> dict[str, Any]:
    """Change the run's settings (merged into what it has); answers as the GET."""
    if not ID_RE.match(run_id):
        raise NotFound("run", field="run")
    run = manage.owned_run(session, run_id, writer)  # another project's run: 404 before anything else
    change = _checked(body)
    moved = store.set_run_policy(session, run, change)
    session.commit()  # viewers must reload only once the change is visible
    store.announce(ctx.hub.publish, session, moved)
    return _run_answer(session, run)


@router.get("/projects/{project}/policy", response_model=ProjectPolicyView, responses=ERRORS)
def get_project_policy(session: SessionDep, writer: ReaderDep,
                       project: Annotated[str, Path(max_length=100)]) -> dict[str, Any]:
    """The project's default settings and the policy they make for a run without its own."""
    proj = _project(session, project, writer)
    own = store.project_settings(session, proj.id)
    return {"project": proj.name, "policy": effective(own), "project_settings": own}


@router.put("/projects/{project}/policy", response_model=ProjectPolicyView, responses=ERRORS,
            openapi_extra=BODY_DOC)
def put_project_policy(session: SessionDep, ctx: ContextDep, writer: TeamDep, body: PolicyBody,
                       project: Annotated[str, Path(max_length=100)]) -> dict[str, Any]:
    """Change the project's default (every run without its own setting follows it)."""
    proj = _project(session, project, writer)
    change = _checked(body)
    moved = store.set_project_policy(session, proj.id, change)
    session.commit()
    store.announce(ctx.hub.publish, session, moved)
    own = store.project_settings(session, proj.id)
    return {"project": proj.name, "policy": effective(own), "project_settings": own}
