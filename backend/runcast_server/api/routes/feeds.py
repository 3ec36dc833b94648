"""Atom feeds of alerts: one per run (``/runs/{id}/alerts.atom``, read rules of the run; with an
entry for each published training report, docs/reports.md) and one per project
(``/projects/{name}/alerts.atom``, its public runs)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any
from xml.etree import ElementTree as ET

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response
from runcast import __version__
from runcast.wire.events import PROJECT_RE
from sqlalchemy import select

from runcast_server.alerts.models import Alert
from runcast_server.alerts.service import alert_view, as_of, summary
from runcast_server.alerts.service import title as alert_title
from runcast_server.api.deps import LanguageDep, SessionDep
from runcast_server.api.read_deps import (
    RUN_ERRORS,
    FullViewDep,
    ReadableRunDep,
    SettingsDep,
    ViewDep,
)
from runcast_server.api.routes.alerts import base_url
from runcast_server.core.errors import NotFound, error_responses
from runcast_server.core.i18n import SOURCE, Messages, messages
from runcast_server.core.models import Project
from runcast_server.policy.apply import View, public_view
from runcast_server.record.models import Run
from runcast_server.reports.service import published as published_reports

router = APIRouter(tags=["alerts"])
ATOM = "http://www.w3.org/2005/Atom"
FEED_ENTRIES = 100
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


def _time(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, f"{{{ATOM}}}{tag}", attrs)
    if text is not None:
        el.text = text
    return el


@dataclass(frozen=True)
class ReportEntry:
    """A report's publication in a run's feed."""

    number: int
    title: str
    published_at: float
    url: str


def render_feed(feed_id: str, title: str, self_url: str, alt_url: str, views: list[dict[str, Any]],
                t: Messages | None = None, reports: Sequence[ReportEntry] = ()) -> bytes:
    """The feed's XML; its titles and categories in ``t``'s language (English by default); ``reports``:
    the run's published reports, one entry each."""
    t = t or messages()
    ET.register_namespace("", ATOM)
    feed = ET.Element(f"{{{ATOM}}}feed", {} if t.language == SOURCE else {XML_LANG: t.language})
    _sub(feed, "id", feed_id)
    _sub(feed, "title", title)
    updated = max([v["closed_at"] or v["opened_at"] for v in views] + [r.published_at for r in reports], default=0.0)
    _sub(feed, "updated", _time(updated))
    _sub(feed, "link", rel="self", href=self_url, type="application/atom+xml")
    _sub(feed, "link", rel="alternate", href=alt_url)
    _sub(feed, "generator", "Runcast", version=__version__)
    author = _sub(feed, "author")
    _sub(author, "name", "Runcast")
    for v in views:
        phase = "close" if v["state"] == "closed" else "open"
        entry = _sub(feed, "entry")
        _sub(entry, "id", f"{feed_id.split('#')[0]}#alert-{v['id']}")
        _sub(entry, "title", summary(v, phase, t))
        _sub(entry, "published", _time(v["opened_at"]))
        _sub(entry, "updated", _time(v["closed_at"] or v["opened_at"]))
        _sub(entry, "link", rel="alternate", href=v.get("url") or alt_url)
        _sub(entry, "category", term=v["kind"], label=alert_title(v["kind"], t))
        _sub(entry, "content", json.dumps({k: v[k] for k in ("run", "kind", "key", "state", "step", "end_step",
                                                              "evidence", "checkpoints")}, default=str), type="text")
    for r in reports:
        entry = _sub(feed, "entry")
        _sub(entry, "id", f"{feed_id.split('#')[0]}#report-{r.number}")
        _sub(entry, "title", t("Report: {title}", title=r.title))
        _sub(entry, "published", _time(r.published_at))
        _sub(entry, "updated", _time(r.published_at))
        _sub(entry, "link", rel="alternate", href=r.url)
        _sub(entry, "category", term="report", label=t("Report"))
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, encoding="utf-8")


def _atom(body: bytes, language: str) -> Response:
    return Response(body, media_type="application/atom+xml; charset=utf-8",
                    headers={"Vary": "Accept-Language", "Content-Language": language})


_ATOM_200: dict[int | str, dict[str, Any]] = {200: {"content": {"application/atom+xml": {}}, "description": "An Atom feed."}}


def _due(view: View, alert: dict[str, Any]) -> bool:
    """Whether a delayed run's reader may see the alert yet (opened before its horizon)."""
    return view.until is None or alert["opened_at"] <= view.until


def _as_of(view: View, alert: dict[str, Any]) -> dict[str, Any]:
    return alert if view.until is None else as_of(alert, view.until)


@router.get("/runs/{run_id}/alerts.atom", response_class=Response, responses={**_ATOM_200, **RUN_ERRORS})
def get_run_alerts_feed(request: Request, session: SessionDep, settings: SettingsDep, found: ReadableRunDep,
             full: FullViewDep, policy: ViewDep, language: LanguageDep) -> Response:
    """The run's newest alerts as an Atom feed."""
    run, project = found
    base = base_url(request, settings)
    alerts = session.scalars(select(Alert).where(Alert.run_id == run.id).order_by(Alert.id.desc()).limit(FEED_ENTRIES))
    views = [_as_of(policy, v) for v in (alert_view(session, a, base_url=base, run=run, project=project, full=full)
                                          for a in alerts) if policy.alert(v) and _due(policy, v)]
    self_url = f"{base}/api/v1/runs/{run.id}/alerts.atom"
    t = messages(language)
    title = t("Runcast alerts: {name}", name=f"{project}/{run.name}")
    reports = [ReportEntry(r.number, v.title, r.published_at or r.updated_at, f"{base}/runs/{run.id}/reports/{r.number}")
               for r, v in published_reports(session, run.id)[:FEED_ENTRIES]]
    return _atom(render_feed(self_url, title, self_url, f"{base}/runs/{run.id}", views, t, reports), language)


@router.get("/projects/{project}/alerts.atom", response_class=Response,
            responses={**_ATOM_200, **error_responses(404, 422)})
def get_project_alerts_feed(request: Request, session: SessionDep, settings: SettingsDep,
                 language: LanguageDep, project: Annotated[str, Path(max_length=100)]) -> Response:
    """The newest alerts of the project's public runs as an Atom feed."""
    if not PROJECT_RE.match(project):
        raise NotFound("project", field="project")
    proj = session.scalar(select(Project).where(Project.name == project))
    if proj is None:
        raise NotFound("project", field="project")
    base = base_url(request, settings)
    rows = session.execute(
        select(Alert, Run).join(Run, Run.id == Alert.run_id)
        .where(Run.project_id == proj.id, Run.visibility == "public")
        .order_by(Alert.id.desc()).limit(FEED_ENTRIES)
    ).all()
    policies = {r.id: public_view(session, r) for r in {r.id: r for _, r in rows}.values()}
    views = [_as_of(policies[r.id], v) for a, r in rows
             if policies[r.id].alert(v := alert_view(session, a, base_url=base, run=r, project=proj.name))
             and _due(policies[r.id], v)]
    self_url = f"{base}/api/v1/projects/{proj.name}/alerts.atom"
    t = messages(language)
    title = t("Runcast alerts: {name}", name=proj.name)
    return _atom(render_feed(self_url, title, self_url, f"{base}/?project={proj.name}", views, t), language)
