"""Report notices: when the team publishes a report, each subscription of its run (and, for a
public run, of its project) that asked for ``reports`` is sent one notice, through the same
delivery as alerts (alerts.transport: signed webhooks, chat robots, mail; the SSRF guard, the
retries, the disabling).

Once per report: the first publication of a number notifies; a new version published later, or
the report published again after an unpublish, sends nothing more (as GitHub notifies a release
once, not each edit of its notes). The notice goes out when the report is public to the
subscribers, who are the public: at once, or, for a run with a broadcast delay, ``delay_s``
after the publication, and only if the report is then still published from that moment (a report
unpublished meanwhile sends nothing; published again, it waits its own delay). A private run's
project-wide subscriptions get nothing (only a run's own, made with its project's token).
"""

from __future__ import annotations

import html
import json
import re
import time
from typing import TYPE_CHECKING, Any, Final

import nh3
from sqlalchemy import delete, or_, select

from runcast_server.alerts.chat import ChatMessage
from runcast_server.alerts.models import Subscription
from runcast_server.alerts.notify import FINISHED, discord_text, slack_text
from runcast_server.alerts.transport import Outgoing, attempt, run_task, unsubscribe_url
from runcast_server.core.db import upsert
from runcast_server.core.i18n import Messages, messages
from runcast_server.core.models import Project
from runcast_server.policy.apply import public_view
from runcast_server.record.models import Run
from runcast_server.reports.blocks import render
from runcast_server.reports.models import Report, ReportDelivery, ReportVersion

if TYPE_CHECKING:
    from runcast_server.alerts.needs import AlertContext

FANOUT_TASK: Final = "runcast.reports.notice_fanout"
DELIVER_TASK: Final = "runcast.reports.notice_deliver"
EVENT: Final = "report.published"  # the body's "event" and X-Runcast-Event
NOTICES: Final = ("alerts", "reports")  # what a subscription may ask for
SUMMARY_CHARS: Final = 300


def published(ctx: AlertContext, run_id: str, report_id: int, published_at: float) -> None:
    """After the commit of a publication: start its fan-out, after the run's broadcast delay if any."""
    with ctx.database.scope() as session:
        run = session.get(Run, run_id)
        delay = public_view(session, run).delay_s if run is not None else 0.0
    schedule_fanout(ctx, report_id, published_at, delay)


def schedule_fanout(ctx: AlertContext, report_id: int, published_at: float, countdown: float) -> None:
    run_task(ctx, FANOUT_TASK, fanout, report_id, published_at, countdown=countdown)


def schedule_delivery(ctx: AlertContext, delivery_id: int, countdown: float = 0.0) -> None:
    run_task(ctx, DELIVER_TASK, deliver, delivery_id, countdown=countdown, life_s=24 * 3600)


def _public(session: Any, report: Report | None, published_at: float, now: float) -> tuple[Run | None, float]:
    """(the run, seconds until the publication at ``published_at`` is public); the run is None
    when that publication is no longer the report's (unpublished, or published again since)."""
    if report is None or report.state != "published" or report.published_at is None \
            or abs(report.published_at - published_at) > 1e-3:
        return None, 0.0
    run = session.get(Run, report.run_id)
    if run is None:
        return None, 0.0
    return run, max(0.0, published_at + public_view(session, run).delay_s - now)


def fanout(ctx: AlertContext, report_id: int, published_at: float) -> list[int]:
    """Create the notices of one publication (once per subscription and report) and schedule them.

    Finished notices older than ``RUNCAST_DELIVERY_RETENTION_S`` are pruned here, as the alerts'
    deliveries are by the alerts' prune: reports are published rarely, so each fan-out does it.
    """
    now = time.time()
    with ctx.database.scope() as session:
        session.execute(delete(ReportDelivery).where(ReportDelivery.status.in_(FINISHED),
                                                     ReportDelivery.created_at < now - ctx.settings.delivery_retention_s))
        run, wait = _public(session, session.get(Report, report_id), published_at, now)
        if run is None:
            return []
        if wait > 0:  # the delay grew meanwhile: not public yet
            schedule_fanout(ctx, report_id, published_at, wait)
            return []
        conds = [Subscription.run_id == run.id]
        if run.visibility == "public":
            conds.append(Subscription.project_id == run.project_id)
        subs = session.scalars(select(Subscription).where(or_(*conds), Subscription.status == "active")
                               .order_by(Subscription.id)).all()
        wanted = [s for s in subs if "reports" in (s.notices or ())]
        if not wanted:
            return []
        rows = [{"subscription_id": s.id, "report_id": report_id, "status": "pending", "attempts": 0,
                 "last_error": None, "created_at": now, "sent_at": None} for s in wanted]
        stmt = upsert(session, ReportDelivery.__table__).on_conflict_do_nothing(
            index_elements=["subscription_id", "report_id"])
        session.execute(stmt, rows)
        ids = list(session.scalars(select(ReportDelivery.id).where(
            ReportDelivery.report_id == report_id, ReportDelivery.status == "pending",
            ReportDelivery.attempts == 0, ReportDelivery.created_at == now)))
    for delivery_id in ids:
        schedule_delivery(ctx, delivery_id)
    return ids


def plain(markdown_html: str) -> str:
    """The report's rendered HTML as one line of text, cut at ``SUMMARY_CHARS``."""
    text = re.sub(r"\s+", " ", html.unescape(nh3.clean(markdown_html, tags=set()))).strip()
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1].rstrip() + "…"


def report_view(session: Any, run: Run, report: Report, base_url: str) -> dict[str, Any] | None:
    """The notice's facts as the public reads the report: run, number, title, URL, summary."""
    v = session.scalar(select(ReportVersion).where(ReportVersion.report_id == report.id,
                                                   ReportVersion.version == report.published_version))
    if v is None:
        return None
    rendered = render(v.body, public_view(session, run).metric)
    return {
        "run": run.id, "run_name": run.name,
        "project": session.scalar(select(Project.name).where(Project.id == run.project_id)),
        "number": report.number, "title": v.title, "version": v.version,
        "from_step": v.from_step, "to_step": v.to_step, "published_at": report.published_at,
        "url": f"{base_url.rstrip('/')}/runs/{run.id}/reports/{report.number}",
        "summary": plain(rendered.html),
    }


def headline(view: dict[str, Any], t: Messages) -> str:
    where = f"{view['project']}/{view['run_name'] or view['run']}"
    return t("Report #{number} on {where}: {title}", number=view["number"], where=where, title=view["title"])


def render_body(sub: Subscription, view: dict[str, Any]) -> bytes:
    """A json, slack or discord webhook's body, in the subscription's language."""
    t = messages(sub.language)
    text, unsub, link = headline(view, t), unsubscribe_url(sub), view["url"]
    if sub.format == "slack":
        body: dict[str, Any] = {"text": f"{slack_text(text)}\n{slack_text(view['summary'])}\n"
                                        f"<{slack_text(link)}|{slack_text(t('Read the report'))}> · "
                                        f"<{slack_text(unsub)}|{slack_text(t('Unsubscribe'))}>"}
    elif sub.format == "discord":
        content = (f"{discord_text(text)[:500]}\n{discord_text(view['summary'])[:1000]}\n<{link}>\n"
                   f"{discord_text(t('Unsubscribe'))}: <{unsub}>")
        body = {"content": content[:2000], "allowed_mentions": {"parse": []}}
    else:
        body = {"event": EVENT, "subscription": sub.id, "report": view, "text": text, "unsubscribe_url": unsub}
    return json.dumps(body, allow_nan=False, separators=(",", ":"), default=str).encode()


def robot_message(sub: Subscription, view: dict[str, Any]) -> ChatMessage:
    t = messages(sub.language)
    return ChatMessage(title=headline(view, t), text=view["summary"], link=view["url"],
                       link_label=t("Read the report"), unsubscribe=unsubscribe_url(sub),
                       unsubscribe_label=t("Unsubscribe"), closed=False)


def deliver(ctx: AlertContext, delivery_id: int) -> str:
    """Send one notice (one attempt); schedules the next attempt on failure. Returns its status."""
    return attempt(ctx, ReportDelivery, delivery_id, _outgoing, lambda countdown: schedule_delivery(ctx, delivery_id, countdown))


def _outgoing(session: Any, d: ReportDelivery) -> tuple[Subscription | None, Outgoing | None]:
    sub = session.get(Subscription, d.subscription_id)
    report = session.get(Report, d.report_id)
    run = session.get(Run, report.run_id) if report is not None and report.state == "published" else None
    view = report_view(session, run, report, sub.base_url) if run is not None and report and sub else None
    if sub is None or view is None:  # unpublished, deleted, or unsubscribed meanwhile
        return sub, None
    text = headline(view, messages(sub.language))
    return sub, Outgoing(event=EVENT, msg_id=f"msg_runcast_report_delivery_{d.id}", delivery=f"report-{d.id}",
                         body=lambda: render_body(sub, view), robot=lambda: robot_message(sub, view),
                         subject=f"[runcast] {text}"[:200], text=f"{text}\n\n{view['summary']}\n\n{view['url']}")
